"""Benchmark: distinguishing data (``harvest mint --augment``) against the plain mint, in one process.

For each pin: mint it (augmentation off; the baseline), then ``recover`` it (augmentation on: derive
rows, build the augmented pin, re-mint the recovered candidates there). Prints kept tasks per family
off and on, candidates recovered per family, the extra seconds per recovered task, the ratio of the
whole augmented run to the baseline, and re-verifies every recovered task from a fresh build of
pin + augmentation (``harvest tasks verify``'s checks).

    python tests/benchmarks/bench_augment.py                  # the gym_visits fixture, in a temp dir
    HARVEST_HOME=... HARVEST_PINS=... python tests/benchmarks/bench_augment.py PIN_ID [PIN_ID ...]

Pins named on the command line must be reserved to a split and not yet minted (the baseline must be a
real mint, not a read of old reports); they are minted into that HARVEST_HOME.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _fixture_pin(root: Path) -> str:
    import os

    from dbt_harvest.corpora.ledger import Params, assign
    from dbt_harvest.harvester.add import AddOptions, add
    from tests.fixtures import fixture_repo

    os.environ["HARVEST_HOME"], os.environ["HARVEST_PINS"] = str(root / "home"), str(root / "pins")
    repo = fixture_repo("gym_visits", root / "repo")
    pin = add(f"{repo.path}@{repo.head}", AddOptions()).pin
    assign(root / "pins", Params(test=0, dev=0, seed=0))
    return pin.id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pins", nargs="*", help="pin ids (default: the gym_visits fixture in a temp dir)")
    parser.add_argument("--max-per-model", type=int, default=3)
    parser.add_argument("--families", default="", help="comma-separated families for both runs (default: all)")
    parser.add_argument("--no-verify", action="store_true", help="skip re-verifying the recovered tasks")
    parser.add_argument("--json", action="store_true", dest="as_json")
    args = parser.parse_args()

    pin_ids = args.pins or [_fixture_pin(Path(tempfile.mkdtemp(prefix="bench-augment-")))]
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.core.pin import pin_path, read_pin
    from dbt_harvest.corpora.store import load_tasks, mint_target
    from dbt_harvest.harvester.augment.run import recover
    from dbt_harvest.harvester.mint.pipeline import MintOptions, load_reports, mint
    from dbt_harvest.harvester.verify import verify

    families = tuple(f for f in args.families.split(",") if f) or None
    options = MintOptions(families=families, max_per_model=args.max_per_model)
    results = []
    for pin_id in pin_ids:
        pin = read_pin(pin_path(pin_id, pins_dir()))
        if load_reports(pin.id):
            raise SystemExit(f"error: {pin.id} was minted already; the baseline must be a fresh mint")
        target = mint_target(harvest_home(), pins_dir())
        started = time.perf_counter()
        mint([pin], options, target)
        off_seconds = time.perf_counter() - started
        off = Counter(r["family"] for r in load_reports(pin.id) if r["kept"])
        started = time.perf_counter()
        report = recover([pin], options, target)
        on_seconds = time.perf_counter() - started
        recovered = Counter({f: row["recovered"] for f, row in report.families.items() if row["recovered"]})
        verdicts = []
        if report.kept_tasks and not args.no_verify:
            tasks = [
                t
                for split in ("train", "dev", "test")
                for t in _tasks(load_tasks, split)
                if t.instance_id in report.kept_tasks
            ]
            verdicts = verify(tasks)
        n = len(report.kept_tasks)
        results.append(
            {
                "pin": pin.id,
                "off": dict(off),
                "on": dict(off + recovered),
                "recovered": dict(recovered),
                "per_family": report.families,
                "no_proposal": report.no_proposal,
                "augmentations": [a.__dict__ for a in report.augmentations],
                "mint_seconds": round(off_seconds, 1),
                "augment_seconds": round(on_seconds, 1),
                "seconds_per_recovered_task": round(on_seconds / n, 1) if n else None,
                "ratio_vs_no_augment": round((off_seconds + on_seconds) / off_seconds, 2),
                "reverified": f"{sum(v.ok for v in verdicts)}/{len(verdicts)}",
            }
        )
    if args.as_json:
        print(json.dumps(results, indent=1, sort_keys=True))
        return
    for r in results:
        print(
            f"{r['pin']}: kept off {r['off']} | on {r['on']} | recovered {r['recovered']} | "
            f"mint {r['mint_seconds']}s, augment {r['augment_seconds']}s, "
            f"{r['seconds_per_recovered_task']}s per recovered task, "
            f"{r['ratio_vs_no_augment']}x the no-augment run | re-verified {r['reverified']}"
        )
        for a in r["augmentations"]:
            print(
                f"  augmentation: {a['rows']} rows for {len(a['keys'])} candidates -> "
                f"{a['pin'] or 'discarded: ' + a['discarded'] + ' ' + a['detail']}"
            )
        if r["no_proposal"]:
            print(f"  no distinguishing row derived: {r['no_proposal']}")


def _tasks(load_tasks, split: str) -> list:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.home import harvest_home, pins_dir

    try:
        return load_tasks(split, harvest_home(), pins_dir(), purpose="inspect")
    except Exception:
        return []


if __name__ == "__main__":
    main()
