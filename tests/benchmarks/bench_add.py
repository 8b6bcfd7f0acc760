"""Benchmark (not a test): `harvest add` of the embedded example against a plain dbt CLI build.

    python tests/benchmarks/bench_add.py [--rounds 3] [--no-sandbox-add]

Each round, alternating so that machine noise hits both sides alike:

- add: ``harvest add <example>@<sha> --package-mirror <mirror> --json`` as a user runs it, in a fresh
  HARVEST_HOME (mirror clone, export, package resolution and vendoring, TWO sandboxed builds through
  the in-process dbt runner under the pinned clock, gold and state install, the pin);
- plain: ``dbt seed && dbt build`` from the dbt CLI on the same project (the exported tree with its
  packages vendored, a plain profiles.yml, no sandbox, no clock), in a fresh copy.

Prints both medians and the ratio add/plain (target <= 1.0), then where the add's time went: per
sandboxed build the child's wall time and its steps (from the build logs), and the rest of the add
(everything that is not the builds).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PLAIN_PROFILE = """{name}:
  target: plain
  outputs:
    plain:
      type: duckdb
      path: {db}
      schema: {schema}
      threads: 1
"""
_FINISHED = re.compile(r"Finished running .*? \(([\d.]+)s\)\.")
_SANDBOX_LINE = re.compile(r"\[harvest sandbox\] sandboxed=(\w+) ok=(\w+) returncode=(-?\d+) wall_s=([\d.]+)")


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "HARVEST_HOME": str(home / "home"), "HARVEST_PINS": str(home / "pins")}


def run_add(example_spec: str, mirror: Path, sandboxed: bool) -> tuple[float, Path, dict]:
    home = Path(tempfile.mkdtemp(prefix="bench-add-"))
    argv = [shutil.which("harvest") or "harvest", "add", example_spec, "--package-mirror", str(mirror), "--json"]
    if not sandboxed:
        argv.append("--no-sandbox")
    started = time.perf_counter()
    done = subprocess.run(argv, env=_env(home), capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"harvest add failed: {done.stderr.strip()[-800:]}")
    return elapsed, home, json.loads(done.stdout)


def build_logs(home: Path) -> list[dict]:
    """Per sandboxed build of an add: the child's wall time and its steps' wall times."""
    found = []
    for log in sorted((home / "home" / "builds").rglob("build*.log")):
        text = log.read_text(errors="replace")
        match = _SANDBOX_LINE.search(text)
        found.append({"log": log.name, "wall_s": float(match.group(4)) if match else float("nan")})
    return found


def step_walls(home: Path) -> list[list[float]]:
    """Per build: the seconds dbt itself reports for running `seed` and `build` ("Finished running …")."""
    out = []
    for log in sorted((home / "home" / "builds").rglob("build*.log")):
        out.append([float(x) for x in _FINISHED.findall(log.read_text(errors="replace"))])
    return out


def plain_project(template: Path, dest: Path, profile: str, schema: str, project_dir: str) -> Path:
    shutil.copytree(template, dest, symlinks=True, ignore=shutil.ignore_patterns(".harvest-template.json"))
    project = dest / project_dir
    (project / "profiles.yml").write_text(PLAIN_PROFILE.format(name=profile, db=dest / "plain.duckdb", schema=schema))
    return project


def run_plain(template: Path, profile: str, schema: str, project_dir: str) -> float:
    root = Path(tempfile.mkdtemp(prefix="bench-plain-"))
    try:
        project = plain_project(template, root / "tree", profile, schema, project_dir)
        dbt = shutil.which("dbt") or "dbt"
        common = ["--project-dir", str(project), "--profiles-dir", str(project)]
        env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}
        started = time.perf_counter()
        for command in ("seed", "build"):
            done = subprocess.run([dbt, command, *common], cwd=project, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"plain dbt {command} failed: {done.stdout[-800:]}")
        return time.perf_counter() - started
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-sandbox-add", action="store_true", help="also time harvest add --no-sandbox")
    args = parser.parse_args()

    from harvester.discovery import discover
    from harvester.example import materialize_example

    scratch = Path(tempfile.mkdtemp(prefix="bench-add-example-"))
    example = materialize_example(scratch / "example")
    # the plain side needs the exported tree with packages vendored: the first add's template gives it
    warm_s, warm_home, _ = run_add(example.spec, example.mirror, True)
    os.environ.update({k: v for k, v in _env(warm_home).items() if k.startswith("HARVEST_")})
    from core.pin import list_pins
    from harvester.workspace import template

    pin = list_pins(warm_home / "pins")[0]
    tree = template(pin)
    project = discover(tree, pin.project_dir)
    print(f"warm-up add: {warm_s:.2f} s (not counted); plain project: {tree / pin.project_dir}", flush=True)

    adds: list[float] = []
    plains: list[float] = []
    nosandbox: list[float] = []
    breakdown: list[tuple[float, list[dict], list[list[float]]]] = []
    homes = [warm_home]
    for index in range(args.rounds):
        order = ("add", "plain") if index % 2 == 0 else ("plain", "add")
        for side in order:
            if side == "add":
                seconds, home, _ = run_add(example.spec, example.mirror, True)
                homes.append(home)
                adds.append(seconds)
                breakdown.append((seconds, build_logs(home), step_walls(home)))
            else:
                plains.append(run_plain(tree, project.profile, pin.profile_schema, pin.project_dir))
        if args.no_sandbox_add:
            seconds, home, _ = run_add(example.spec, example.mirror, False)
            homes.append(home)
            nosandbox.append(seconds)
        print(f"round {index + 1}: add {adds[-1]:.2f} s, plain {plains[-1]:.2f} s"
              + (f", add --no-sandbox {nosandbox[-1]:.2f} s" if nosandbox else ""), flush=True)

    add_med, plain_med = statistics.median(adds), statistics.median(plains)
    print(f"\nharvest add (2 sandboxed builds): median {add_med:.2f} s over {len(adds)} ({', '.join(f'{x:.2f}' for x in adds)})")
    print(f"plain dbt seed && dbt build:     median {plain_med:.2f} s over {len(plains)} ({', '.join(f'{x:.2f}' for x in plains)})")
    if nosandbox:
        print(f"harvest add --no-sandbox:         median {statistics.median(nosandbox):.2f} s")
    print(f"ratio add/plain: {add_med / plain_med:.2f} (target <= 1.0)")
    print("\nwhere the add's time went (per round: total, sandboxed children's wall, the rest):")
    for total, builds, steps in breakdown:
        walls = [b["wall_s"] for b in builds]
        longest = max(walls) if walls else float("nan")
        steps_txt = "; ".join(
            f"seed {s[0]:.2f} + build {s[1]:.2f} + rest of child {w - sum(s):.2f}" if len(s) == 2 else "?"
            for s, w in zip(steps, walls)
        )
        print(f"  total {total:.2f} s; children {', '.join(f'{w:.2f}' for w in walls)} s (in parallel); "
              f"outside the children {total - longest:.2f} s; inside: {steps_txt}")
    print("  ('rest of child': interpreter + dbt import, bwrap start-up, parse, capture, faketime)")
    for home in homes:
        shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
