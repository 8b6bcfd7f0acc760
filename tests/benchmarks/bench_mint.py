"""Benchmark (not a test): the two-stage mint against the naive one, on the embedded example, in one run.

    python tests/benchmarks/bench_mint.py [--sample 30] [--seed 0] [--families filter,null]

Harvests the example in a temporary HARVEST_HOME (or reuses ``--home``/``--pins`` where a harvested pin
already lives), lists EVERY candidate of every mutable model (no per-model cap), then:

- two-stage (harvester.mint.shard.run_shard, uncapped): screen every candidate in the locked-down
  DuckDB engine (the mutant, then its wrong repairs and the dbt tests they face, re-run there), confirm
  the survivors with sandboxed incremental dbt builds in one warm child per model; the whole run's time;
- naive, on a seeded random sample of ``--sample`` of the same candidates (kept ones and both kinds of
  rejected ones included): the SAME admission rules with no screening shortcut. Per candidate: a fresh
  workspace, a full sandboxed ``dbt seed`` + ``dbt build`` + capture of the mutant; the screening rules
  applied to what that build produced (equivalent, ungradable, catastrophic, effect mismatch, the grading
  spec chosen the same way, invisible to the official check, a leaking statement); then the mutant must
  score 0 official and strict, the true repair (full build) must score 1 on both, the repair must be one
  hunk, and a wrong repair (full builds, up to the same number of tries) must pass every dbt test the true
  repair passes and score 0 official.

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
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def harvest(root: Path) -> object:
    from harvester.add import AddOptions, add
    from harvester.example import materialize_example

    example = materialize_example(root / "example")
    started = time.perf_counter()
    result = add(example.spec, AddOptions(package_mirror=example.mirror))
    print(f"harvest add of the example: {time.perf_counter() - started:.1f} s", flush=True)
    return result.pin


def naive_decide(pin, nodes, state_db: Path, gold: Path, cand, scratch: Path) -> tuple[bool, str]:
    """The admission rules on full sandboxed builds only (see the module docstring)."""
    import duckdb

    from core.scorer import official, score
    from harvester.mint.confirm import MAX_WRONG_TRIES, BuildContext, build_variant
    from harvester.mint.screen import (Observation, check_catastrophic, check_changed, check_effect,
                                       check_gradable, choose_grading)
    from harvester.mint.shard import _symptoms
    from harvester.mint.statement import statement_for
    from core.patching import apply_to_text, make_patch, parse_patch
    from harvester.sandbox import Limits

    ctx = BuildContext(pin, gold, scratch, True, Limits(wall_s=600.0))  # no base_db: full seed + build
    broken = cand.broken
    mutant = build_variant(ctx, "mutant", cand.file, broken)
    if not mutant.models_ok or mutant.gold_file is None:
        return False, "mutant_build_fails"
    # the screening rules, applied to the full build's output
    tables = {t.name: t for t in pin.tables}
    captured = {t.name: t for t in mutant.tables}
    changed: dict[str, tuple[int, int]] = {}
    differing: dict[str, tuple[int, ...]] = {}
    con = duckdb.connect(config={"enable_external_access": True})
    # the pin's database under dbt's own catalog name, so that its views resolve as they did in the build
    catalog = next((n.relation.split(".")[0].strip('"') for n in nodes.values() if n.relation), "build")
    con.execute(f"ATTACH '{state_db}' AS \"{catalog}\" (READ_ONLY)")
    con.execute(f"ATTACH '{mutant.gold_file}' AS mutant (READ_ONLY)")
    probe = SimpleNamespace(con=con)
    try:
        for name, table in captured.items():
            record = tables.get(name)
            if record is not None and not record.deterministic:
                continue  # a full rebuild re-rolls nondeterministic tables; screening never re-runs them
            if record is None or (table.rows, table.fingerprint) != (record.rows, record.fingerprint):
                changed[name] = (record.rows if record else -1, table.rows)
                if record is not None:
                    schema, alias = name.split(".", 1)
                    differing[name] = _differing(probe, catalog, schema, alias)
    finally:
        con.close()
    root = nodes[cand.model].table
    obs = Observation(changed, differing, root, (tables[root].rows if root in tables else -1,
                                                 captured[root].rows if root in captured else -1), len(nodes))
    for check in (check_changed(obs, pin), check_gradable(obs, pin), check_catastrophic(obs, pin),
                  check_effect(obs, cand.mutation.effect)):
        if not check.ok:
            return False, check.reason
    spec = choose_grading(obs, pin, nodes)
    if official(gold, mutant.gold_file, spec).passed:
        return False, "invisible"
    edit = cand.mutation.edit
    try:
        statement_for(_symptoms(spec.condition_tabs, spec.condition_cols, obs, pin, nodes),
                      [cand.original[edit.start:edit.end], edit.replacement])
    except ValueError:
        return False, "statement_leaks"
    # the confirmation rules, on full builds
    verdicts = score(gold, mutant.gold_file, spec)
    if verdicts.official.passed or verdicts.strict.passed:
        return False, "mutant_passes"
    fix_patch = make_patch(cand.file, broken, cand.original)
    fixed = build_variant(ctx, "repair", cand.file, apply_to_text(broken, parse_patch(fix_patch)[0]))
    if not fixed.models_ok or fixed.gold_file is None:
        return False, "repair_build_fails"
    repaired = score(gold, fixed.gold_file, spec)
    if not (repaired.official.passed and repaired.strict.passed):
        return False, "repair_fails"
    if sum(len(f.hunks) for f in parse_patch(fix_patch)) != 1:
        return False, "repair_not_minimal"
    for index, repair in enumerate(cand.mutation.wrong_repairs[:MAX_WRONG_TRIES]):
        result = build_variant(ctx, f"wrong{index}", cand.file, repair.apply(broken))
        if not result.models_ok or result.gold_file is None:
            continue
        if not set(result.failed_tests) <= set(fixed.failed_tests):
            continue
        if score(gold, result.gold_file, spec).official.passed:
            continue
        return True, ""
    return False, "no_wrong_repair"


def _differing(probe, catalog: str, schema: str, alias: str) -> tuple[int, ...]:
    from harvester.mint.screen import column_signatures

    gold_sig = column_signatures(probe, f'"{catalog}"."{schema}"."{alias}"')
    mut_sig = column_signatures(probe, f'mutant."{schema}"."{alias}"')
    return tuple(i for i, sig in enumerate(gold_sig) if i >= len(mut_sig) or mut_sig[i] != sig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=30, help="candidates decided the naive way (>= 30 asked)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", default="", help="comma-separated mutator families (default: all)")
    parser.add_argument("--two-stage-scope", choices=("all", "sample"), default="all",
                        help="run the two-stage pipeline on every candidate (default) or only on the sample")
    parser.add_argument("--home", type=Path, help="reuse a HARVEST_HOME holding the harvested example")
    parser.add_argument("--pins", type=Path, help="the pins folder that goes with --home")
    args = parser.parse_args()
    families = tuple(f for f in args.families.split(",") if f) or None

    scratch = Path(tempfile.mkdtemp(prefix="bench-mint-"))
    try:
        if args.home and args.pins:
            os.environ["HARVEST_HOME"], os.environ["HARVEST_PINS"] = str(args.home), str(args.pins)
            from core.pin import list_pins

            pin = next(p for p in list_pins(args.pins) if "shop_analytics" in p.id)
        else:
            os.environ["HARVEST_HOME"], os.environ["HARVEST_PINS"] = str(scratch / "home"), str(scratch / "pins")
            pin = harvest(scratch)
        from harvester.gold import gold_path
        from harvester.mint.candidates import model_candidates, mutable
        from harvester.mint.lineage import models
        from harvester.mint.shard import ShardJob, run_shard
        from harvester.state import load_state
        from harvester.workspace import template

        state = load_state(pin.id)
        nodes = models(state.manifest)
        tree = template(pin)
        gold = gold_path(pin.gold_sha256)
        shards = [uid for uid, node in sorted(nodes.items()) if not mutable(node, pin)]
        candidates = {c.key: c for uid in shards
                      for c in model_candidates(pin, nodes[uid], tree, families, args.seed)}
        print(f"{len(candidates)} candidates over {len(shards)} mutable models", flush=True)

        # the naive sample: seeded, uniform over the candidates (so kept and rejected ones come in their
        # natural proportions; the decisions printed below show which kinds were drawn)
        rng = random.Random(args.seed)
        sample = rng.sample(sorted(candidates), min(args.sample, len(candidates)))
        scope = set(candidates) if args.two_stage_scope == "all" else set(sample)

        # two-stage, uncapped, on every candidate (or only on the sample, when time is short)
        started = time.perf_counter()
        two_stage: dict[str, tuple[bool, str, str]] = {}
        screen_s = confirm_s = 0.0
        builds = reused = 0
        for uid in shards:
            job = ShardJob(pin_id=pin.id, model=uid, split="train", split_group="bench", families=families,
                           max_per_model=10**6, already_kept=0, done_keys=frozenset(set(candidates) - scope),
                           seed=args.seed)
            for report in run_shard(job).reports:
                two_stage[report.key] = (report.kept, report.stage, report.reason)
                screen_s += report.timings.get("screen", 0.0)
                confirm_s += report.timings.get("confirm", 0.0)
                variant_builds = [v for k, v in report.timings.items() if k.endswith("_build")]
                builds += sum(1 for v in variant_builds if v >= 0.05)
                reused += sum(1 for v in variant_builds if v < 0.05)  # identical input: built once
        two_stage_s = time.perf_counter() - started
        survivors = sum(1 for _, stage, _ in two_stage.values() if stage == "confirm")
        kept = [k for k, (ok, _, _) in two_stage.items() if ok]
        print(f"two-stage: {len(two_stage)} candidates in {two_stage_s:.1f} s (screening {screen_s:.1f} s, "
              f"{survivors} confirmed with dbt in {confirm_s:.1f} s: {builds} warm builds, {reused} reused; "
              f"{len(kept)} kept)", flush=True)

        naive: dict[str, tuple[bool, str]] = {}
        started = time.perf_counter()
        for index, key in enumerate(sample, 1):
            one = time.perf_counter()
            naive[key] = naive_decide(pin, nodes, state.database, gold, candidates[key], scratch / "naive" / key)
            shutil.rmtree(scratch / "naive" / key, ignore_errors=True)
            ts = two_stage[key]
            print(f"  [{index}/{len(sample)}] {candidates[key].mutation.operator:<24} two-stage "
                  f"{'kept' if ts[0] else 'rejected (' + ts[2] + ')':<34} naive "
                  f"{'kept' if naive[key][0] else 'rejected (' + naive[key][1] + ')':<34} {time.perf_counter() - one:.1f} s",
                  flush=True)
        naive_s = time.perf_counter() - started

        same = [k for k in sample if naive[k][0] == two_stage[k][0]]
        two_rate = len(two_stage) / two_stage_s  # over what it ran on: every candidate, or the sample
        naive_rate = len(sample) / naive_s
        print(f"\ntwo-stage: {two_rate:.2f} candidates/s ({len(two_stage)} in {two_stage_s:.1f} s)")
        print(f"naive:     {naive_rate:.4f} candidates/s ({len(sample)} in {naive_s:.1f} s; "
              f"{sum(naive[k][0] for k in sample)} kept)")
        print(f"ratio: {two_rate / naive_rate:.0f}x (target >= 50x)")
        print(f"same decision (kept vs rejected) on {len(same)} of {len(sample)} sampled candidates")
        if len(same) != len(sample):
            for key in sample:
                if key not in same:
                    print(f"  DIFFERENT {key} {candidates[key].mutation.operator}: two-stage {two_stage[key]}, naive {naive[key]}")
            raise SystemExit(1)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
