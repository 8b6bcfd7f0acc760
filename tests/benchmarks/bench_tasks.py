"""Which tasks a benchmark plays: a minted HARVEST_HOME given with --home/--pins (e.g. a real repository's),
filtered by --split and --repo and sampled with --tasks/--seed, or else the example harvested and minted
by the benchmark's own ``prepare``. One place, so the benchmarks that time the environment and the
reward pick their tasks the same way; and ``one_pin``, the pin a benchmark of one repository names."""

from __future__ import annotations

import argparse
import os
import random
from collections.abc import Callable
from pathlib import Path


def add_task_options(parser: argparse.ArgumentParser, *, default_tasks: int, split: bool = True) -> None:
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--home", type=Path, help="a HARVEST_HOME with minted tasks (e.g. of a real repository)")
    parser.add_argument("--pins", type=Path, help="the pins folder that goes with --home")
    if split:
        parser.add_argument("--split", default="train", help="which split's tasks to play (with --home)")
    parser.add_argument(
        "--tasks", type=int, default=default_tasks, help="at most this many tasks, a seeded sample (0: all)"
    )
    parser.add_argument("--repo", default="", help="only tasks whose pin id contains this text (with --home)")


def chosen_tasks(args: argparse.Namespace, prepare: Callable[[Path], list], root: Path) -> list:
    """The tasks to play (see the module docstring); sets HARVEST_HOME/HARVEST_PINS for --home."""
    if args.home and args.pins:
        from dbt_harvest.corpora.store import load_tasks

        os.environ["HARVEST_HOME"], os.environ["HARVEST_PINS"] = str(args.home), str(args.pins)
        split = getattr(args, "split", "train")
        tasks = [t for t in load_tasks(split, args.home, args.pins, purpose="inspect") if args.repo in t.pin]
    else:
        tasks = prepare(root)
    if args.tasks:
        tasks = random.Random(args.seed).sample(tasks, min(args.tasks, len(tasks)))
    return tasks


def one_pin(pins: Path, repo: str):  # type: ignore[no-untyped-def]
    """The one pin under ``pins`` whose id contains ``repo``; exits with a one-line error otherwise."""
    from dbt_harvest.core.pin import list_pins

    found = [p for p in list_pins(pins) if repo in p.id]
    if len(found) != 1:
        raise SystemExit(f"--repo {repo!r} matches {len(found)} pins in {pins}; name exactly one")
    return found[0]
