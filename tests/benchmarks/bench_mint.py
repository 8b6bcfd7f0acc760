"""Benchmark (not a test): the two-stage mint against the naive one, in one run.

    python tests/benchmarks/bench_mint.py [--sample 30] [--seed 0] [--families filter,null]
    python tests/benchmarks/bench_mint.py --home H --pins P --repo owner__name [--sample 10]   # a real repository

Without ``--home`` the embedded example is harvested in a temporary HARVEST_HOME. With ``--home``/``--pins``
(a HARVEST_HOME holding a pinned repository's state and gold, e.g. a local copy of a real public dbt
project; never committed, no test depends on one) the pin whose id contains ``--repo`` is used. Lists
EVERY candidate of every mutable model (no per-model cap), then:

- two-stage (harvester.mint.shard.run_shard, uncapped): screen every candidate in the locked-down
  DuckDB engine (the mutant, then its wrong repairs and the dbt tests they face, re-run there), confirm
  the survivors with sandboxed incremental dbt builds in one warm child per model; the whole run's time;
- naive, on a seeded random sample of ``--sample`` of the same candidates (kept ones and both kinds of
  rejected ones included): the SAME admission rules with no screening shortcut. Per candidate: a fresh
  workspace, a full sandboxed ``dbt seed`` + ``dbt build`` + capture of every variant, decided by
  confirmation's own rules (``harvester.mint.confirm.CONFIRM_RULES``: the observation checks on what the
  build produced, the grading spec chosen from it, mutant 0 official and strict, true repair 1 on both in
  one hunk, an informative wrong repair among every one screening may consider, the statement's claims,
  and no duplicate of another task the two-stage run kept from the same model).

Prints candidates per second for both, the ratio (target >= 50x) and the decisions side by side; the
decisions (kept vs rejected) must be the same on every sampled candidate (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def harvest(root: Path) -> object:
    from dbt_harvest.harvester.add import AddOptions, add
    from dbt_harvest.harvester.example import materialize_example

    example = materialize_example(root / "example")
    started = time.perf_counter()
    result = add(example.spec, AddOptions(package_mirror=example.mirror))
    print(f"harvest add of the example: {time.perf_counter() - started:.1f} s", flush=True)
    return result.pin


def naive_decide(pin, nodes, state_db: Path, gold: Path, cand, scratch: Path, seen) -> tuple[bool, str]:
    """The admission rules on full sandboxed builds only (see the module docstring): confirmation's own
    rules (``CONFIRM_RULES``: the observation checks, grading and statement from the build, informative
    wrong repair, claims, no duplicate of a kept task) with no screening, every variant a fresh seed +
    build, every wrong repair that screening may consider tried. ``seen``: the broken-output signatures
    and statements of the other tasks kept from the same model (see ``duplicates_of``)."""
    from dbt_harvest.harvester.mint.confirm import BuildContext, confirm
    from dbt_harvest.harvester.mint.screen import MAX_WRONG_SCREENED
    from dbt_harvest.harvester.sandbox import Limits

    ctx = BuildContext(pin, gold, scratch, True, Limits(wall_s=600.0))  # no base_db: full seed + build
    outcome = confirm(ctx, cand, nodes=nodes, wrong_tries=MAX_WRONG_SCREENED, seen=seen)
    return outcome.ok, outcome.reason


def duplicates_of(key: str, model: str, kept: dict[str, tuple[str, str, str]]):  # type: ignore[no-untyped-def]
    """What candidate ``key`` must not duplicate: every OTHER task the two-stage run kept from its model.

    A shard rejects a candidate whose broken outputs or statement repeat a task kept before it, so that
    rule depends on what was kept, not on the candidate alone. Duplication is symmetric, so testing
    against all the model's other kept tasks gives the naive path the same verdict without replaying the
    order: a kept task duplicates none of them, and a rejected duplicate repeats one of them.
    """
    from dbt_harvest.harvester.mint.confirm import Seen

    others = [(sig, stmt) for k, (m, sig, stmt) in kept.items() if m == model and k != key]
    return Seen(frozenset(sig for sig, _ in others), frozenset(stmt for _, stmt in others))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=30, help="candidates decided the naive way (>= 30 asked)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", default="", help="comma-separated mutator families (default: all)")
    parser.add_argument(
        "--two-stage-scope",
        choices=("all", "sample"),
        default="all",
        help="run the two-stage pipeline on every candidate (default) or only on the sample",
    )
    parser.add_argument("--home", type=Path, help="a HARVEST_HOME holding the pin (its state and gold)")
    parser.add_argument("--pins", type=Path, help="the pins folder that goes with --home")
    parser.add_argument(
        "--repo", default="shop_analytics", help="with --home: the pin whose id contains this text (exactly one must)"
    )
    args = parser.parse_args()
    families = tuple(f for f in args.families.split(",") if f) or None

    scratch = Path(tempfile.mkdtemp(prefix="bench-mint-"))
    try:
        if args.home and args.pins:
            os.environ["HARVEST_HOME"], os.environ["HARVEST_PINS"] = str(args.home), str(args.pins)
            from bench_tasks import one_pin

            pin = one_pin(args.pins, args.repo)
            print(f"pin {pin.id}", flush=True)
        else:
            os.environ["HARVEST_HOME"], os.environ["HARVEST_PINS"] = str(scratch / "home"), str(scratch / "pins")
            pin = harvest(scratch)
        from dbt_harvest.harvester.gold import gold_path
        from dbt_harvest.harvester.mint.candidates import model_candidates, why_not_mutable
        from dbt_harvest.harvester.mint.lineage import models
        from dbt_harvest.harvester.mint.shard import ShardJob, run_shard
        from dbt_harvest.harvester.state import load_state
        from dbt_harvest.harvester.workspace import template

        state = load_state(pin.id)
        nodes = models(state.manifest)
        tree = template(pin)
        gold = gold_path(pin.gold_sha256)
        shards = [uid for uid, node in sorted(nodes.items()) if not why_not_mutable(node, pin)]
        candidates = {c.key: c for uid in shards for c in model_candidates(pin, nodes[uid], tree, families, args.seed)}
        print(f"{len(candidates)} candidates over {len(shards)} mutable models", flush=True)

        # the naive sample: seeded, uniform over the candidates (so kept and rejected ones come in their
        # natural proportions; the decisions printed below show which kinds were drawn)
        rng = random.Random(args.seed)
        sample = rng.sample(sorted(candidates), min(args.sample, len(candidates)))
        scope = set(candidates) if args.two_stage_scope == "all" else set(sample)

        # two-stage, uncapped, on every candidate (or only on the sample, when time is short)
        started = time.perf_counter()
        two_stage: dict[str, tuple[bool, str, str]] = {}
        kept_by: dict[str, tuple[str, str, str]] = {}  # key -> (model, broken signature, statement digest)
        screen_s = confirm_s = 0.0
        builds = reused = 0
        for uid in shards:
            job = ShardJob(
                pin_id=pin.id,
                model=uid,
                split="train",
                split_group="bench",
                families=families,
                max_per_model=10**6,
                already_kept=0,
                done_keys=frozenset(set(candidates) - scope),
                seed=args.seed,
            )
            for report in run_shard(job).reports:
                two_stage[report.key] = (report.kept, report.stage, report.reason)
                if report.kept:
                    kept_by[report.key] = (report.model, report.signature, report.statement_digest)
                screen_s += report.timings.get("screen", 0.0)
                confirm_s += report.timings.get("confirm", 0.0)
                variant_builds = [v for k, v in report.timings.items() if k.endswith("_build")]
                builds += sum(1 for v in variant_builds if v >= 0.05)
                reused += sum(1 for v in variant_builds if v < 0.05)  # identical input: built once
        two_stage_s = time.perf_counter() - started
        survivors = sum(1 for _, stage, _ in two_stage.values() if stage == "confirm")
        kept = [k for k, (ok, _, _) in two_stage.items() if ok]
        print(
            f"two-stage: {len(two_stage)} candidates in {two_stage_s:.1f} s (screening {screen_s:.1f} s, "
            f"{survivors} confirmed with dbt in {confirm_s:.1f} s: {builds} warm builds, {reused} reused; "
            f"{len(kept)} kept)",
            flush=True,
        )

        naive: dict[str, tuple[bool, str]] = {}
        started = time.perf_counter()
        for index, key in enumerate(sample, 1):
            one = time.perf_counter()
            naive[key] = naive_decide(
                pin,
                nodes,
                state.database,
                gold,
                candidates[key],
                scratch / "naive" / key,
                duplicates_of(key, candidates[key].model, kept_by),
            )
            shutil.rmtree(scratch / "naive" / key, ignore_errors=True)
            ts = two_stage[key]
            print(
                f"  [{index}/{len(sample)}] {candidates[key].mutation.operator:<24} two-stage "
                f"{'kept' if ts[0] else 'rejected (' + ts[2] + ')':<34} naive "
                f"{'kept' if naive[key][0] else 'rejected (' + naive[key][1] + ')':<34} {time.perf_counter() - one:.1f} s",
                flush=True,
            )
        naive_s = time.perf_counter() - started

        same = [k for k in sample if naive[k][0] == two_stage[k][0]]
        two_rate = len(two_stage) / two_stage_s  # over what it ran on: every candidate, or the sample
        naive_rate = len(sample) / naive_s
        print(f"\ntwo-stage: {two_rate:.2f} candidates/s ({len(two_stage)} in {two_stage_s:.1f} s)")
        print(
            f"naive:     {naive_rate:.4f} candidates/s ({len(sample)} in {naive_s:.1f} s; "
            f"{sum(naive[k][0] for k in sample)} kept)"
        )
        print(f"ratio: {two_rate / naive_rate:.0f}x (target >= 50x)")
        print(f"same decision (kept vs rejected) on {len(same)} of {len(sample)} sampled candidates")
        if len(same) != len(sample):
            for key in sample:
                if key not in same:
                    print(
                        f"  DIFFERENT {key} {candidates[key].mutation.operator}: two-stage {two_stage[key]}, naive {naive[key]}"
                    )
            raise SystemExit(1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
