"""Benchmark (not a test): the eval environment's validate and submit, fast checks vs the dbt build.

    python tests/benchmarks/bench_env.py [--dbt 4] [--seed 0]
    python tests/benchmarks/bench_env.py --home H --pins P --repo owner__name [--tasks 8]   # a real repository

Without ``--home`` the embedded example is harvested and minted in a temporary HARVEST_HOME. For each
task, episodes write a completion (the true repair, each wrong repair, the broken file with a harmless
whitespace change, a completion that does not compile), call ``validate`` and ``submit``: every
completion graded through harvester.grading.grade (eval/env/graded_edits.py), and a seeded sample of ``--dbt`` completions
again with a full sandboxed ``dbt seed`` + ``dbt build`` per call (``RunSettings(graded_edits=False)``: the agent's workspace built).

Prints median and p95 seconds per validate and per submit on each path, the ratio dbt/fast of the
medians (target: submit median <= 1 s), how many calls left the fast path, and checks that both paths
give the same validate verdict and the same submission (built, tests, official, strict) on the sample.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from bench_reward import completions, prepare, stats  # noqa: E402
from bench_tasks import add_task_options, chosen_tasks  # noqa: E402


def play(task, text: str, fast: bool, scratch: Path) -> tuple[float, float, str, dict]:
    """(validate seconds, submit seconds, validate verdict line, submission fields) of one episode."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.eval.env.episode import Episode
    from dbt_harvest.eval.env.tools import RunSettings
    from dbt_harvest.eval.env.workspace import discard, materialize

    ws = materialize(task, pins_dir(), scratch)
    try:
        episode = Episode(task, ws, RunSettings(graded_edits=fast))
        episode.act("write_file", {"path": task.file, "content": text})
        started = time.perf_counter()
        validated = episode.act("validate", {})
        validate_s = time.perf_counter() - started
        started = time.perf_counter()
        episode.act("submit", {})
        submit_s = time.perf_counter() - started
        found = episode.submission.to_dict() if episode.submission else {}
        found.pop("wall_s", None)
        found.pop("first_error", None)
        verdict = validated.split(":", 1)[0] + ("" if "PASS" in validated else f": {validated.split(':', 2)[1]}")
        return validate_s, submit_s, verdict, found
    finally:
        discard(ws)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dbt", type=int, default=4, help="completions also played with the dbt build per call")
    add_task_options(parser, default_tasks=0)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-env-"))
    try:
        tasks = chosen_tasks(args, prepare, root)
        rng = random.Random(args.seed)
        from dbt_harvest.eval.env.graded_edits import validate_edits

        items = [(task, label, text) for task in tasks for label, text, _ in completions(task)]
        left = sum(validate_edits(task, {task.file: text}, fallback=None) is None for task, _, text in items)
        print(f"{len(tasks)} tasks, {len(items)} completions; {left} need dbt (they leave the fast path)", flush=True)
        fast_v: list[float] = []
        fast_s: list[float] = []
        answers: dict[tuple[str, str], dict[str, tuple[str, dict]]] = {}
        for task, label, text in items:
            v, s, verdict, found = play(task, text, True, root)
            fast_v.append(v)
            fast_s.append(s)
            answers.setdefault((task.instance_id, label), {})["fast"] = (verdict, found)
        dbt_v: list[float] = []
        dbt_s: list[float] = []
        for task, label, text in rng.sample(items, min(args.dbt, len(items))):
            v, s, verdict, found = play(task, text, False, root)
            dbt_v.append(v)
            dbt_s.append(s)
            answers[(task.instance_id, label)]["dbt"] = (verdict, found)
        disagree = [(key, got) for key, got in answers.items() if "dbt" in got and got["dbt"] != got["fast"]]
        print(f"\nvalidate, fast checks: {stats(fast_v)}")
        print(f"submit,   fast checks: {stats(fast_s)}")
        if dbt_s:
            print(f"validate, dbt build:   {stats(dbt_v)}")
            print(f"submit,   dbt build:   {stats(dbt_s)}")
            print(
                f"ratio dbt/fast (medians): validate {statistics.median(dbt_v) / statistics.median(fast_v):.1f}x, "
                f"submit {statistics.median(dbt_s) / statistics.median(fast_s):.1f}x"
            )
        print(f"target submit median <= 1 s: {'met' if statistics.median(fast_s) <= 1.0 else 'NOT met'}")
        print(
            f"verdicts compared on {sum('dbt' in g for g in answers.values())} completions: "
            f"{len(disagree)} disagreements"
        )
        for key, got in disagree:
            print(f"  DISAGREE {key}: {got}")
        if disagree:
            raise SystemExit(1)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
