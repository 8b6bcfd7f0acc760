"""Benchmark (not a test): the eval environment's submit latency, on the fast path and on the fallback.

    python tests/benchmarks/bench_submit.py [--tasks 3] [--seed 0]
    python tests/benchmarks/bench_submit.py --home H --pins P --repo owner__name [--tasks 3]   # a real repository

Without ``--home`` the embedded example is harvested and minted in a temporary HARVEST_HOME; with it, the
tasks of that HARVEST_HOME (e.g. minted from a local copy of a real public dbt project; never committed,
no test depends on one; ``--repo`` keeps the tasks whose pin id contains it). Each episode writes its
files and calls ``submit`` through ``eval.env.episode.Episode`` (what ``RepairEnvironment`` runs); only the
submit is timed.

- fast path: the true repair, each wrong repair, the broken file with a whitespace change;
- fallback (edits the fast path cannot transplant): the true repair and the first wrong repair each
  with a Jinja comment written, and the true repair with a new macro file. Every fallback submit is
  played twice, interleaved: through the environment's warm sandboxed child (``harvester.grading.warm``,
  one for the whole run, as one environment holds it) and through a cold child per submit (the
  ``naive`` strategy).

Prints median and p95 seconds per submit for each, the first warm submit apart (it starts the child and
primes dbt's partial parse), the ratio cold/warm of the medians, the target (median <= 1 s per submit over
the mix played), and checks that warm and cold give the same submission on every fallback edit.
"""

from __future__ import annotations

import argparse
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

MACRO = "{% macro harvest_bench_one() %}1{% endmacro %}\n"


def submit(task, edits: dict[str, str], warm, scratch: Path) -> tuple[float, dict, str] | None:
    """(submit seconds, submission fields, grading path) of one episode that writes ``edits`` (None when the
    environment refuses one of the writes, e.g. a macro folder the project does not have)."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.eval.env.episode import Episode
    from dbt_harvest.eval.env.workspace import discard, materialize

    ws = materialize(task, pins_dir(), scratch)
    try:
        episode = Episode(task, ws, warm=warm)
        for path, text in edits.items():
            episode.act("write_file", {"path": path, "content": text})
            if path not in episode.edits:
                return None
        started = time.perf_counter()
        episode.act("submit", {})
        seconds = time.perf_counter() - started
        assert episode.submission is not None
        found = episode.submission.to_dict()
        found.pop("wall_s", None)
        return seconds, found, episode.submission.path
    finally:
        discard(ws)


def edits_of(task) -> tuple[list[tuple[str, dict[str, str]]], list[tuple[str, dict[str, str]]]]:
    """(fast-path edits, fallback edits) of one task, labelled."""
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.pin import pin_path, read_pin

    texts = {label: text for label, text, _ in completions(task)}
    project_dir = read_pin(pin_path(task.pin, pins_dir())).project_dir
    project = "" if project_dir in ("", ".") else project_dir.rstrip("/") + "/"
    fast = [
        (label, {task.file: texts[label]})
        for label in texts
        if label.startswith(("fix", "wrong", "broken")) and label != "fix;"
    ]
    fallback = [
        ("fix+jinja", {task.file: texts["fix"].rstrip("\n") + "\n{# edited #}\n"}),
        ("fix+macro", {task.file: texts["fix"], f"{project}macros/harvest_bench.sql": MACRO}),
    ]
    if "wrong0" in texts:
        fallback.append(("wrong0+jinja", {task.file: texts["wrong0"].rstrip("\n") + "\n{# edited #}\n"}))
    return fast, fallback


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_task_options(parser, default_tasks=3)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-submit-"))
    try:
        tasks = chosen_tasks(args, prepare, root)
        from dbt_harvest.harvester.grading.warm import WarmBuilds

        fast_s: list[float] = []
        warm_s: list[float] = []
        cold_s: list[float] = []
        first_warm = 0.0
        disagree: list[tuple[str, str, dict, dict]] = []
        left_fast = 0
        with WarmBuilds(root) as warm:
            for task in tasks:
                fast, fallback = edits_of(task)
                for label, edits in fast:
                    played = submit(task, edits, warm, root)
                    assert played is not None, (task.instance_id, label)
                    fast_s.append(played[0])
                    left_fast += played[2] != "fast"
                for label, edits in fallback:
                    played = submit(task, edits, warm, root)
                    if played is None:
                        print(f"  {task.instance_id} {label}: a write was refused; skipped", flush=True)
                        continue
                    hot, hot_found, hot_path = played
                    cold, cold_found, cold_path = submit(task, edits, None, root) or (0.0, {}, "")
                    assert (hot_path, cold_path) == ("warm", "naive"), (task.instance_id, label, hot_path, cold_path)
                    if warm.builds == 1:
                        first_warm = hot
                    else:
                        warm_s.append(hot)
                    cold_s.append(cold)
                    if hot_found != cold_found:
                        disagree.append((task.instance_id, label, hot_found, cold_found))
                    print(
                        f"  {task.instance_id} {label}: warm {hot:.2f} s, cold {cold:.2f} s, "
                        f"official {hot_found['official']}/{cold_found['official']}",
                        flush=True,
                    )
            starts = warm.opened
        print(
            f"\n{len(tasks)} tasks; {len(fast_s)} fast-path submits ({left_fast} left the fast path), "
            f"{len(cold_s)} fallback submits each way; warm children opened: {starts}"
        )
        print(f"submit, fast path:              {stats(fast_s)}")
        print(
            f"submit, fallback, warm child:   {stats(warm_s)}   (first warm submit, with start + prime: "
            f"{first_warm:.2f} s)"
        )
        print(f"submit, fallback, cold child:   {stats(cold_s)}")
        if warm_s and cold_s:
            print(f"ratio cold/warm fallback (medians): {statistics.median(cold_s) / statistics.median(warm_s):.1f}x")
        mix = fast_s + warm_s
        print(
            f"target submit median <= 1 s: fast path {statistics.median(fast_s):.3f} s "
            f"({'met' if statistics.median(fast_s) <= 1.0 else 'NOT met'}); "
            f"warm fallback {statistics.median(warm_s) if warm_s else float('nan'):.3f} s "
            f"({'met' if warm_s and statistics.median(warm_s) <= 1.0 else 'NOT met'}); "
            f"all submits played {statistics.median(mix):.3f} s"
        )
        print(f"verdicts compared warm vs cold on {len(cold_s)} fallback submits: {len(disagree)} disagreements")
        for instance_id, label, hot_found, cold_found in disagree:
            print(f"  DISAGREE {instance_id} {label}: warm {hot_found} cold {cold_found}")
        if disagree:
            raise SystemExit(1)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
