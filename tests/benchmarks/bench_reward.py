"""Benchmark (not a test): the single-turn GRPO reward on the embedded example's tasks.

    python tests/benchmarks/bench_reward.py [--repeats 3] [--naive 6] [--dbt 6] [--seed 0]
    python tests/benchmarks/bench_reward.py --home H --pins P --repo owner__name [--tasks 8]   # a real repository

Harvests and mints the example in a temporary HARVEST_HOME (train split), or reads the train tasks of a
HARVEST_HOME given with ``--home``/``--pins`` (e.g. minted from a local copy of a real public dbt project;
never committed, no test depends on one; ``--repo`` keeps the tasks whose pin id contains it), then scores completions for
every task, correct and wrong mixed: the true repair (1), each wrong repair (0), the broken file with a
harmless whitespace change (0), and a completion that does not compile (0). Three ways:

- ``build_and_score`` (harvester/grading/edited.py): the fast path where it applies, else a sandboxed
  incremental build; every completion, ``--repeats`` times, interleaved;
- the sandboxed incremental dbt build alone (``mode=dbt``) on a seeded sample of ``--dbt`` completions;
- naive: a fresh workspace and a full sandboxed ``dbt seed`` + ``dbt build`` per rollout (``mode=naive``)
  on a seeded sample of ``--naive`` completions.

Prints median and p95 seconds per rollout for each, the ratio naive/fast (targets: median <= 0.5 s,
>= 10x), and checks that every path gives the same verdicts on the completions it scored.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tasks import add_task_options, chosen_tasks  # noqa: E402


def prepare(root: Path) -> list:
    """Harvest + mint the example into ``root`` (train split); return the task records."""
    os.environ["HARVEST_HOME"] = str(root / "home")
    os.environ["HARVEST_PINS"] = str(root / "pins")
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.ledger import Params, assign
    from dbt_harvest.corpora.store import load_tasks, mint_target
    from dbt_harvest.harvester.add import AddOptions, add
    from dbt_harvest.harvester.example import materialize_example
    from dbt_harvest.harvester.mint.pipeline import MintOptions, mint

    example = materialize_example(root / "example")
    started = time.perf_counter()
    result = add(example.spec, AddOptions(package_mirror=example.mirror))
    assign(root / "pins", Params(test=0, dev=0, seed=0))
    mint([result.pin], MintOptions(max_per_model=2, seed=0), mint_target(harvest_home(), pins_dir()))
    print(f"harvest + mint of the example: {time.perf_counter() - started:.1f} s", flush=True)
    return load_tasks("train", root / "home", root / "pins", purpose="inspect")


def completions(task) -> list[tuple[str, str, int | None]]:
    """(label, file text, expected official score) for one task."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.patching import apply_to_text, parse_patch
    from dbt_harvest.core.pin import pin_path, read_pin
    from dbt_harvest.harvester.workspace import template

    pin = read_pin(pin_path(task.pin, pins_dir()))
    original = (template(pin) / task.file).read_text(encoding="utf-8")
    broken = apply_to_text(original, parse_patch(task.broken_patch)[0])
    fixed = apply_to_text(broken, parse_patch(task.fix_patch)[0])
    out: list[tuple[str, str, int | None]] = [("fix", fixed, 1)]
    for index, patch in enumerate(task.wrong_repair_patches):
        out.append((f"wrong{index}", apply_to_text(broken, parse_patch(patch)[0]), 0))
    out.append(("broken+ws", broken.rstrip("\n") + "\n\n", 0))
    out.append(("syntax", broken.replace("select", "selec", 1) if "select" in broken else broken + "\n)", 0))
    out.append(("fix;", fixed.rstrip() + ";\n", None))  # what a trailing semicolon scores: paths must agree
    return out


def stats(values: list[float]) -> str:
    if not values:
        return "not run (n=0)"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"median {statistics.median(ordered):.3f} s, p95 {p95:.3f} s, n={len(ordered)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the fast reward over every completion")
    parser.add_argument("--naive", type=int, default=6, help="completions scored by a full build per rollout")
    parser.add_argument("--dbt", type=int, default=6, help="completions scored by the incremental dbt build")
    add_task_options(parser, default_tasks=0, split=False)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-reward-"))
    try:
        tasks = chosen_tasks(args, prepare, root)
        from dbt_harvest.harvester.grading.edited import grade

        items = [(task, label, text, want) for task in tasks for label, text, want in completions(task)]
        print(
            f"{len(tasks)} tasks, {len(items)} completions "
            f"({sum(w == 1 for *_, w in items)} correct, {sum(w == 0 for *_, w in items)} wrong, {sum(w is None for *_, w in items)} unknown)",
            flush=True,
        )
        verdicts: dict[tuple[str, str], dict[str, int]] = {}
        paths: dict[str, int] = {}

        def timed(mode: str, task, label: str, text: str) -> float:
            started = time.perf_counter()
            verdict = grade(task, {task.file: text}, mode)
            path = verdict.path
            seconds = time.perf_counter() - started
            verdicts.setdefault((task.instance_id, label), {})[mode if mode != "fast" else "reward"] = verdict.official
            if mode == "fast":
                paths[path] = paths.get(path, 0) + 1
            return seconds

        rng = random.Random(args.seed)
        cold: list[float] = []  # the first rollout of a task in this process also prepares it
        fast: list[float] = []
        seen: set[str] = set()
        for _ in range(args.repeats):
            order = list(items)
            rng.shuffle(order)
            for task, label, text, _ in order:
                seconds = timed("fast", task, label, text)
                fast.append(seconds)
                if task.instance_id not in seen:
                    seen.add(task.instance_id)
                    cold.append(seconds)
        sample_dbt = rng.sample(items, min(args.dbt, len(items)))
        sample_naive = rng.sample(items, min(args.naive, len(items)))
        dbt_times = [timed("dbt", task, label, text) for task, label, text, _ in sample_dbt]
        naive_times = [timed("naive", task, label, text) for task, label, text, _ in sample_naive]

        wrong_expect = [
            (t.instance_id, label, want, verdicts[(t.instance_id, label)]["reward"])
            for t, label, _, want in items
            if want is not None and verdicts[(t.instance_id, label)]["reward"] != want
        ]
        disagree = [(key, got) for key, got in verdicts.items() if len(set(got.values())) > 1]
        print(f"\nreward (build_and_score, paths taken {paths}): {stats(fast)}")
        print(f"  of which first rollout of a task (prepares its workspace and engine): {stats(cold)}")
        print(f"incremental sandboxed dbt build:                {stats(dbt_times)}")
        print(f"naive full sandboxed build per rollout:         {stats(naive_times)}")

        def ratio(slow: list[float]) -> str:
            return f"{statistics.median(slow) / statistics.median(fast):.1f}x" if slow else "not run"

        print(
            f"ratio naive/reward (medians): {ratio(naive_times)} (target >= 10x); "
            f"incremental dbt/reward: {ratio(dbt_times)}; "
            f"reward median target <= 0.5 s: {'met' if statistics.median(fast) <= 0.5 else 'MISSED'}"
        )
        print(
            f"verdicts: {len(verdicts)} completions; paths disagreeing: {len(disagree)}; "
            f"unexpected scores: {len(wrong_expect)}"
        )
        for item in disagree + wrong_expect:
            print("  MISMATCH", item)
        if disagree:
            raise SystemExit(1)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
