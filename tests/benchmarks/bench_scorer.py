"""Benchmark (not a test): the fast official scorer vs the literal pandas reference, in one process.

Gold: ROWS x 12 mixed-type graded columns (BIGINT, DOUBLE, DECIMAL, VARCHAR, DATE, TIMESTAMP, BOOLEAN).
Passing submission: the same rows shuffled, columns reordered and renamed. Failing submission: the same
with one VARCHAR value changed. Prints times, the reference/fast ratios and the strict verdict's time,
and checks that both implementations agree. The fast paths run ``--repeat`` times (median wall time, and
CPU time of the process, which a busy shared machine inflates less); the reference runs once.

    python tests/benchmarks/bench_scorer.py --rows 100000
    python tests/benchmarks/bench_scorer.py --rows 1000000 --reference pass   # the 1M reference: minutes
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dbt_harvest.core.scorer import GradingSpec, official, strict  # noqa: E402
from tests.core.scorer.reference import table_verdict  # noqa: E402

COLUMNS = """
    range AS id,
    (range * 7919) % 1000003 AS k1,
    (range % 977) - 400 AS k2,
    round(random() * 1e6, 3) AS amount,
    random() * 100 AS ratio,
    (range % 1000) / 7.0 AS share,
    CAST(round(random() * 10000, 2) AS DECIMAL(12, 2)) AS price,
    'cust_' || (range % 50000) AS customer,
    CASE WHEN range % 11 = 0 THEN NULL ELSE 'region_' || (range % 13) END AS region,
    DATE '2020-01-01' + CAST(range % 3000 AS INTEGER) AS day,
    TIMESTAMP '2020-01-01 00:00:00' + to_seconds(range * 37) AS seen_at,
    range % 3 = 0 AS flag
"""
PRED_ORDER = "flag, seen_at, day, region, customer, price, share, ratio, amount, k2, k1, id"


def build(folder: Path, rows: int) -> tuple[Path, Path, Path]:
    gold, good, bad = folder / "gold.duckdb", folder / "pass.duckdb", folder / "fail.duckdb"
    con = duckdb.connect(str(gold))
    con.execute("SELECT setseed(0.42)")
    con.execute(f"CREATE TABLE big AS SELECT {COLUMNS} FROM range({rows})")
    con.close()
    renamed = ", ".join(f"{c.strip()} AS x_{c.strip()}" for c in PRED_ORDER.split(","))
    for path, tweak in ((good, ""), (bad, "UPDATE big SET x_customer = x_customer || '_' WHERE x_id = 7")):
        con = duckdb.connect(str(path))
        con.execute(f"ATTACH '{gold}' AS g (READ_ONLY)")
        con.execute(f"CREATE TABLE big AS SELECT {renamed} FROM g.big ORDER BY hash(id)")
        if tweak:
            con.execute(tweak)
        con.execute("DETACH g")
        con.close()
    return gold, good, bad


def timed(fn, *args):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def repeated(repeat: int, fn, *args):  # type: ignore[no-untyped-def]
    """(result, median wall seconds, median CPU seconds) over ``repeat`` runs."""
    walls, cpus = [], []
    result = None
    for _ in range(repeat):
        cpu = time.process_time()
        result, wall = timed(fn, *args)
        walls.append(wall)
        cpus.append(time.process_time() - cpu)
    return result, statistics.median(walls), statistics.median(cpus)


def reference(gold: Path, pred: Path) -> bool:
    g = duckdb.connect(str(gold), read_only=True)
    p = duckdb.connect(str(pred), read_only=True)
    try:
        return table_verdict(g, p, "big", list(range(12)), True)
    finally:
        g.close()
        p.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--reference",
        choices=["both", "pass", "fail", "none"],
        default="both",
        help="which submissions the slow reference also scores",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each fast path (median reported)")
    args = parser.parse_args()
    spec = GradingSpec("gold.duckdb", ("big",), (tuple(range(12)),), (True,))
    with tempfile.TemporaryDirectory() as tmp:
        gold, good, bad = build(Path(tmp), args.rows)
        print(f"rows {args.rows:,} x 12 graded columns")
        for label, pred in (("pass", good), ("fail", bad)):
            verdict, fast_s, fast_cpu = repeated(args.repeat, official, gold, pred, spec)
            line = f"{label}: fast official {verdict.score} in {fast_s:.3f}s (cpu {fast_cpu:.3f}s)"
            if label == "pass":
                s_verdict, strict_s, strict_cpu = repeated(args.repeat, strict, gold, pred, spec)
                line += f"; strict {s_verdict.score} in {strict_s:.3f}s (cpu {strict_cpu:.3f}s)"
            if args.reference in {"both", label}:
                ref, ref_s = timed(reference, gold, pred)
                agree = "agree" if int(ref) == verdict.score else "DISAGREE"
                line += f"; reference {int(ref)} in {ref_s:.1f}s; ratio {ref_s / fast_s:.0f}x ({agree})"
            print(line, flush=True)


if __name__ == "__main__":
    main()
