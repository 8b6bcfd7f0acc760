"""Benchmark (not a test): one augmentation probe re-running only what its answer depends on, against
re-running every model of the project, in one run.

    python tests/benchmarks/bench_augment_probe.py                                   # the sensor_feed fixture
    python tests/benchmarks/bench_augment_probe.py --home H --pins P --repo owner__name [--models 12]

A probe is what every screen and template try of ``harvest mint --augment`` pays: a copy of the pin's built
data, rows inserted into a seed, models re-run from their compiled SQL in DuckDB, and the mutated model's
and its descendants' fingerprints read. For up to ``--models`` mutable models (each with one seed it
reads), the benchmark times the base probe (no row) and a probe with one cloned row, first with the
bound (``augment/reach.py``: the model, its descendants and the ancestors the seed reaches), then with
every model re-run (the code before the bound), and checks that both say the same thing: whether the
row changes the model's outputs (exit 1 otherwise). Prints seconds per probe for both and the ratio.
With ``--home`` the pin comes from a HARVEST_HOME holding its state (a local copy of a real public dbt
project; never committed, no test depends on one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _fixture_pin(root: Path):  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.add import AddOptions, add
    from tests.fixtures import fixture_repo

    repo = fixture_repo("sensor_feed", root / "repo")
    return add(f"{repo.path}@{repo.head}", AddOptions()).pin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path)
    parser.add_argument("--pins", type=Path)
    parser.add_argument("--repo", default="sensor_feed", help="with --home: the pin whose id contains this text")
    parser.add_argument("--models", type=int, default=12, help="mutable models probed (deepest first)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-probe-"))
    try:
        if args.home and args.pins:
            os.environ["HARVEST_HOME"], os.environ["HARVEST_PINS"] = str(args.home), str(args.pins)
            from bench_tasks import one_pin

            pin = one_pin(args.pins, args.repo)
        else:
            os.environ["HARVEST_HOME"], os.environ["HARVEST_PINS"] = str(scratch / "home"), str(scratch / "pins")
            pin = _fixture_pin(scratch)
        from dbt_harvest.harvester.augment import reach, run
        from dbt_harvest.harvester.augment.derive import SeedRow, render, upstream_seeds
        from dbt_harvest.harvester.mint.candidates import why_not_mutable
        from dbt_harvest.harvester.mint.lineage import depth, models
        from dbt_harvest.harvester.state import load_state

        manifest = load_state(pin.id).manifest
        nodes = models(manifest)
        seeds = run._seeds_of(pin)
        mutable = sorted(
            (u for u, n in nodes.items() if not why_not_mutable(n, pin)), key=lambda u: (-depth(nodes, u), u)
        )
        probes = []
        for uid in mutable:
            seed = next((s for s in sorted(upstream_seeds(manifest, uid)) if seeds.get(s) and seeds[s].rows), None)
            if seed is not None:
                probes.append((uid, seed))
            if len(probes) >= args.models:
                break
        print(f"pin {pin.id}: {len(nodes)} models, {len(probes)} probed", flush=True)
        bounded = reach.models_to_rerun

        def every_model(nodes_, feeds, touched, model):  # type: ignore[no-untyped-def]
            return frozenset(nodes_)

        seconds = {"bounded": 0.0, "every model": 0.0}
        answers: dict[str, list[bool | None]] = {"bounded": [], "every model": []}
        reran = 0
        for mode, chooser in (("bounded", bounded), ("every model", every_model)):
            reach.models_to_rerun = chooser  # what run._rerun_with calls
            for index, (uid, seed) in enumerate(probes):
                _, written = render(seeds, [SeedRow(seed, 0, ())])
                started = time.perf_counter()
                base = run._outputs(pin, manifest, nodes, seeds, [], uid, scratch / f"{index}-b", [seed])
                probe = run._outputs(pin, manifest, nodes, seeds, written, uid, scratch / f"{index}-p", [seed])
                seconds[mode] += time.perf_counter() - started
                answers[mode].append(None if base is None or probe is None else probe != base)
                if mode == "bounded":
                    reran += len(bounded(nodes, reach.seed_feeds(manifest), [seed], uid))
        reach.models_to_rerun = bounded
        n = 2 * len(probes)
        print(
            f"bounded:     {seconds['bounded'] / n:.3f} s per probe ({reran / max(len(probes), 1):.1f} models re-run on average)"
        )
        print(f"every model: {seconds['every model'] / n:.3f} s per probe ({len(nodes)} models)")
        print(f"ratio: {seconds['every model'] / max(seconds['bounded'], 1e-9):.1f}x")
        same = sum(a == b for a, b in zip(answers["bounded"], answers["every model"]))
        print(f"same answer (the row changes the outputs or not) on {same} of {len(probes)} probes")
        if same != len(probes):
            raise SystemExit(1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
