"""Benchmark (not a test): `harvest add` against a plain dbt CLI build of the same project, in one run.

    python tests/benchmarks/bench_add.py [--rounds 3] [--no-sandbox-add] [--baseline-tree PATH/TO/OTHER/CHECKOUT]
    python tests/benchmarks/bench_add.py --pins P --repo owner__name --bare /path/owner/name.git \
        --package-mirror M [--rounds 2]                                    # a pinned real repository

Without ``--pins`` the embedded example is used. With it, the pin whose id contains ``--repo`` names the
repository (a local bare copy of a real public dbt project given by ``--bare``, recorded under the pin's
URL with ``--origin``; never committed, no test depends on one), its commit, project folder, clock and
compat patch. Each round, alternating so that machine noise hits every side alike:

- add: ``harvest add <repo>@<sha> --package-mirror <mirror> --json`` as a user runs it, in a fresh
  HARVEST_HOME (mirror clone, export, package resolution and vendoring, the sandboxed gold builds
  under the pinned clock, gold and state install, the pin);
- baseline add (``--baseline-tree``): the same command run from another source tree (e.g. main before
  a change), so before and after are measured in one run against the same plain builds;
- plain: ``dbt seed && dbt build`` from the dbt CLI on the same project (the exported tree with its
  packages vendored, a plain profiles.yml, no sandbox, no clock), in a fresh copy.

Prints the medians and the ratios add/plain (target <= 0.7), the machine's CPU seconds per run (all
processes, from /proc/stat: the sandboxed ones are not this process's children to account), checks that every add wrote the same gold
(its sha256 and the tables the pin records: rows, fingerprints, columns; with ``--pins`` the tables are
also compared with that pin's, made by whatever code made it), then where the add's time went: per sandboxed build
the child's wall time and its steps (from the build logs), and the rest of the add.
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
_SANDBOX_LINE = re.compile(r"\[harvest sandbox\] sandboxed=(\w+) ok=(\w+) returncode=(-?\d+) wall_s=([\d.]+)")


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "HARVEST_HOME": str(home / "home"), "HARVEST_PINS": str(home / "pins")}


def importable(tree: Path, scratch: Path) -> tuple[Path, str]:
    """The PYTHONPATH entry and CLI module that run ``tree``'s code, not the installed one. A tree from
    before the one import root has its layers at the top (``cli``); a later one maps them beneath
    ``dbt_harvest`` (at install time through setup.py, later through src/dbt_harvest's own links), so a
    folder of links stands in for either."""
    root = tree / "src" / "dbt_harvest"
    if not (root / "__init__.py").is_file():
        return tree, "cli"
    shim = scratch / "shim" / "dbt_harvest"
    shim.mkdir(parents=True)
    for entry in root.iterdir():
        if entry.suffix == ".py":
            (shim / entry.name).symlink_to(entry)
    for layer in ("core", "mutators", "harvester", "corpora", "eval", "train", "cli"):
        (shim / layer).symlink_to(tree / layer, target_is_directory=True)
    return shim.parent, "dbt_harvest.cli"


def run_add(
    spec: str, mirror: Path, sandboxed: bool, extra: tuple[str, ...] = (), tree: Path = ROOT
) -> tuple[float, Path, dict]:
    """``harvest add`` as a user runs it (from the source ``tree``), in a fresh HARVEST_HOME."""
    home = Path(tempfile.mkdtemp(prefix="bench-add-"))
    path, module = importable(tree, home)
    argv = [
        sys.executable,
        "-c",
        f"import sys; from {module} import main; sys.argv[0] = 'harvest'; main()",
        "add",
        spec,
        "--package-mirror",
        str(mirror),
        "--json",
        *extra,
    ]
    if not sandboxed:
        argv.append("--no-sandbox")
    started, busy = time.perf_counter(), machine_busy_s()
    done = subprocess.run(argv, env={**_env(home), "PYTHONPATH": str(path)}, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    CPU.append(machine_busy_s() - busy)
    if done.returncode != 0:
        raise SystemExit(f"harvest add failed: {done.stderr.strip()[-800:]}")
    return elapsed, home, json.loads(done.stdout)


#: CPU seconds the whole machine spent during each run_add / run_plain call, in call order
CPU: list[float] = []


def machine_busy_s() -> float:
    """CPU seconds spent so far by the whole machine (user, nice, system, irq, softirq: /proc/stat).

    The sandboxed processes live in bubblewrap's PID namespace and are never reaped by this process, so
    its RUSAGE_CHILDREN misses them; the machine's own count sees everything (and any other load, alike
    for every side of the comparison: the sides alternate)."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = handle.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def build_logs(home: Path) -> list[dict]:
    """Per sandboxed build of an add: the child's wall time and its steps' wall times."""
    found = []
    for log in sorted((home / "home" / "builds").rglob("build*.log")):
        text = log.read_text(errors="replace")
        # a parallel child's log (builds.log) holds one summary line per build, each with the child's wall
        for match in _SANDBOX_LINE.finditer(text):
            found.append({"log": log.name, "wall_s": float(match.group(4))})
    return found


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
        started, busy = time.perf_counter(), machine_busy_s()
        for command in ("seed", "build"):
            done = subprocess.run([dbt, command, *common], cwd=project, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"plain dbt {command} failed: {done.stdout[-800:]}")
        CPU.append(machine_busy_s() - busy)
        return time.perf_counter() - started
    finally:
        shutil.rmtree(root, ignore_errors=True)


def gold_contents(pins: Path, pin_id: str = "") -> tuple:
    """What the pin records of its gold: the file's sha256, and per table name, rows, fingerprint, columns,
    stability."""
    from dbt_harvest.core.pin import list_pins

    pin = next(p for p in list_pins(pins) if pin_id in p.id)
    return pin.gold_sha256, tuple(
        sorted(
            (t.name, t.rows, t.fingerprint, t.columns, t.deterministic, t.unstable_columns, t.database_columns)
            for t in pin.tables
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-sandbox-add", action="store_true", help="also time harvest add --no-sandbox")
    parser.add_argument(
        "--baseline-tree", type=Path, help="also time harvest add run from this source tree (before/after in one run)"
    )
    parser.add_argument("--pins", type=Path, help="a pins folder holding the pin of a real repository")
    parser.add_argument("--repo", default="", help="with --pins: the pin whose id contains this text")
    parser.add_argument("--bare", type=Path, help="with --pins: a local bare git copy of that repository")
    parser.add_argument(
        "--package-mirror", type=Path, help="with --pins: the package mirror (or HARVEST_PACKAGE_MIRROR)"
    )
    args = parser.parse_args()

    from dbt_harvest.core.pin import list_pins
    from dbt_harvest.harvester.discovery import discover
    from dbt_harvest.harvester.workspace import template

    scratch = Path(tempfile.mkdtemp(prefix="bench-add-example-"))
    if args.pins:
        found = [p for p in list_pins(args.pins) if args.repo in p.id]
        if len(found) != 1 or args.bare is None:
            raise SystemExit(
                f"--repo {args.repo!r} matches {len(found)} pins in {args.pins} (name exactly one) "
                "and --bare must name the local copy"
            )
        real = found[0]
        mirror = args.package_mirror or Path(os.environ.get("HARVEST_PACKAGE_MIRROR", ""))
        spec = f"{args.bare}@{real.commit}"
        extra: tuple[str, ...] = ("--origin", real.url, "--project-dir", real.project_dir, "--clock", real.clock)
        if real.compat_patch_sha256:
            extra += ("--compat-patch", str(args.pins / "patches" / f"{real.compat_patch_sha256}.diff"))
        print(f"pin {real.id}", flush=True)
    else:
        from dbt_harvest.harvester.example import materialize_example

        example = materialize_example(scratch / "example")
        spec, mirror, extra = example.spec, example.mirror, ()
    # the plain side needs the exported tree with packages vendored: the first add's template gives it
    warm_s, warm_home, _ = run_add(spec, mirror, True, extra)
    os.environ.update({k: v for k, v in _env(warm_home).items() if k.startswith("HARVEST_")})
    pin = list_pins(warm_home / "pins")[0]
    tree = template(pin)
    project = discover(tree, pin.project_dir)
    golds = {gold_contents(warm_home / "pins")}
    print(f"warm-up add: {warm_s:.2f} s (not counted); plain project: {tree / pin.project_dir}", flush=True)

    adds: list[float] = []
    baselines: list[float] = []
    baseline_golds: set[tuple] = set()
    plains: list[float] = []
    nosandbox: list[float] = []
    breakdown: list[tuple[float, list[dict]]] = []
    homes = [warm_home]
    cpu: dict[str, list[float]] = {"add": [], "plain": [], "baseline": []}
    sides = ["add", "plain"] + (["baseline"] if args.baseline_tree else [])
    for index in range(args.rounds):
        order = sides[index % len(sides) :] + sides[: index % len(sides)]
        for side in order:
            if side == "add":
                seconds, home, _ = run_add(spec, mirror, True, extra)
                homes.append(home)
                adds.append(seconds)
                golds.add(gold_contents(home / "pins"))
                breakdown.append((seconds, build_logs(home)))
            elif side == "baseline":
                seconds, home, _ = run_add(spec, mirror, True, extra, tree=args.baseline_tree)
                homes.append(home)
                baselines.append(seconds)
                baseline_golds.add(gold_contents(home / "pins"))
            else:
                plains.append(run_plain(tree, project.profile, pin.profile_schema, pin.project_dir))
            cpu[side].append(CPU[-1])
        if args.no_sandbox_add:
            seconds, home, _ = run_add(spec, mirror, False, extra)
            homes.append(home)
            nosandbox.append(seconds)
        print(
            f"round {index + 1}: add {adds[-1]:.2f} s, plain {plains[-1]:.2f} s"
            + (f", baseline add {baselines[-1]:.2f} s" if baselines else "")
            + (f", add --no-sandbox {nosandbox[-1]:.2f} s" if nosandbox else ""),
            flush=True,
        )

    add_med, plain_med = statistics.median(adds), statistics.median(plains)
    print(
        f"\nharvest add (sandboxed gold builds): median {add_med:.2f} s over {len(adds)} ({', '.join(f'{x:.2f}' for x in adds)})"
    )
    print(
        f"plain dbt seed && dbt build:        median {plain_med:.2f} s over {len(plains)} ({', '.join(f'{x:.2f}' for x in plains)})"
    )
    if baselines:
        print(
            f"baseline add ({args.baseline_tree}): median {statistics.median(baselines):.2f} s over {len(baselines)} "
            f"({', '.join(f'{x:.2f}' for x in baselines)})"
        )
    if nosandbox:
        print(f"harvest add --no-sandbox:            median {statistics.median(nosandbox):.2f} s")
    print(f"ratio add/plain: {add_med / plain_med:.2f} (target <= 0.7)")
    if baselines:
        print(
            f"ratio baseline add/plain: {statistics.median(baselines) / plain_med:.2f}; "
            f"add/baseline add: {add_med / statistics.median(baselines):.2f}"
        )
    cpu_med = {side: statistics.median(values) for side, values in cpu.items() if values}
    print(
        "machine CPU seconds per run (every process, /proc/stat), median: "
        + ", ".join(f"{side} {value:.2f}" for side, value in cpu_med.items())
        + f"; add/plain {cpu_med['add'] / cpu_med['plain']:.2f}"
        + (f", add/baseline add {cpu_med['add'] / cpu_med['baseline']:.2f}" if "baseline" in cpu_med else "")
    )
    same = len(golds) == 1 and (not baseline_golds or baseline_golds == golds)
    as_pinned = {g[1] for g in golds} == {gold_contents(args.pins, real.id)[1]} if args.pins else False
    print(
        f"gold (sha256; tables, rows, fingerprints, columns, stability) of {len(adds) + 1} adds"
        + (f" and {len(baselines)} baseline adds" if baselines else "")
        + f": {'identical' if same else 'DIFFERENT'} ({', '.join(sorted(g[0][:12] for g in golds | baseline_golds))})"
        + (f"; tables as in the given pin's: {as_pinned}" if args.pins else "")
    )
    print("\nwhere the add's time went (per round: total, each sandboxed child's wall, the rest):")
    for total, builds in breakdown:
        walls = [b["wall_s"] for b in builds]
        longest = max(walls) if walls else float("nan")
        print(
            f"  total {total:.2f} s; {len(walls)} builds, their child's wall {', '.join(f'{w:.2f}' for w in walls)} s; "
            f"outside the longest child {total - longest:.2f} s"
        )
    print("  (the first two builds share one child: bubblewrap, interpreter and dbt import once, then a fork per")
    print("   build: full parse, seed, build, capture; a third build, when they differ, has a child of its own)")
    for home in homes:
        shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
    if not same:
        print("DIFFERENT gold between adds")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
