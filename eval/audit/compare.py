"""The transfer report: two audits of the same tasks (a base model and its adapter), compared task by task.

With the 16–48 tasks a dev or test split holds, a difference of two tasks is noise, and an unpaired
comparison of two k/N figures cannot tell. So the comparison is paired, per task:

- the 2×2 table of outcomes (both pass, only A, only B, neither) on the official check;
- exact McNemar: under "no difference" each discordant task is a fair coin, so the two-sided p-value is
  the binomial tail of the smaller discordant count (exact, valid for any N — the chi-squared
  approximation is not, below ~25 discordant pairs);
- a paired bootstrap interval for the difference in pass rate (B − A), resampling tasks with a fixed
  seed, so the report is reproducible;
- the verdict in words: "distinguishable from noise" only when McNemar's p is below ``alpha``;
- the minimum detectable effect of a comparison of this size (``eval.audit.power``, run A's pass rate as
  the base), so a "not distinguishable" verdict says how large a gain it could have seen.

Also side by side: the failure ladder (and which rung each task moved to), per family and per repository.
Outputs ``compare.json``, ``compare.md`` and ``compare.png``. Everything but the writers is pure.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.eval.audit.power import PowerAnalysis, analyse
from dbt_harvest.eval.audit.report import build_report
from dbt_harvest.eval.audit.rundir import RunDir
from dbt_harvest.eval.env.errors import EnvError


class CompareError(EnvError):
    """Two audit runs that cannot be compared task by task."""


@dataclass(frozen=True)
class Paired:
    """The paired 2×2 table of official outcomes over the same N tasks."""

    both: int
    only_a: int
    only_b: int
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.only_a + self.only_b + self.neither

    @property
    def discordant(self) -> int:
        return self.only_a + self.only_b


def paired_table(a: list[int], b: list[int]) -> Paired:
    """The 2×2 table of two aligned 0/1 outcome vectors."""
    if len(a) != len(b):
        raise ValueError("outcome vectors must be aligned task by task")
    pairs = Counter(zip(a, b))
    return Paired(both=pairs[(1, 1)], only_a=pairs[(1, 0)], only_b=pairs[(0, 1)], neither=pairs[(0, 0)])


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: P(a split at least this uneven) for a fair coin on the discordant pairs."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2.0 * tail)


def paired_bootstrap(
    a: list[int], b: list[int], resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval for mean(b) − mean(a), resampling task indices with replacement."""
    n = len(a)
    if n == 0:
        return (0.0, 0.0)
    rng = random.Random(seed)
    deltas = [b_i - a_i for a_i, b_i in zip(a, b)]
    stats = sorted(sum(deltas[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    lo = stats[int(math.floor((1 - level) / 2 * (resamples - 1)))]
    hi = stats[int(math.ceil((1 + level) / 2 * (resamples - 1)))]
    return (lo, hi)


@dataclass(frozen=True)
class Comparison:
    """Everything compare.json holds."""

    run_a: str
    run_b: str
    label_a: str
    label_b: str
    split: str
    n: int
    official_a: int
    official_b: int
    strict_a: int
    strict_b: int
    table: Paired
    p_value: float
    alpha: float
    ci_low: float
    ci_high: float
    distinguishable: bool
    ladder_a: dict[str, int]
    ladder_b: dict[str, int]
    ladder_labels: dict[str, str]
    rung_moves: dict[str, int]
    by_family: dict[str, dict[str, int]]
    by_repo: dict[str, dict[str, int]]
    tasks: list[dict[str, Any]]
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    power: dict[str, Any] = field(default_factory=dict)  # eval.audit.power.PowerAnalysis.to_dict()

    @property
    def difference(self) -> float:
        return (self.official_b - self.official_a) / self.n if self.n else 0.0

    def summary(self) -> str:
        """One sentence a person can act on."""
        delta = self.official_b - self.official_a
        verdict = (
            f"distinguishable from noise (exact McNemar p = {self.p_value:.3g} < {self.alpha})"
            if self.distinguishable
            else f"NOT distinguishable from noise (exact McNemar p = {self.p_value:.3g} ≥ {self.alpha})"
        )
        return (
            f"{self.label_b} {self.official_b}/{self.n} vs {self.label_a} {self.official_a}/{self.n} "
            f"({delta:+d} tasks; {self.table.only_b} gained, {self.table.only_a} lost): {verdict}"
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["difference"] = self.difference
        data["summary"] = self.summary()
        return data


def _grouped(
    rows_a: dict[str, dict], rows_b: dict[str, dict], key: str, default: str = "?"
) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for instance_id, row in rows_a.items():
        bucket = out.setdefault(str(row.get(key) or default), {"n": 0, "official_a": 0, "official_b": 0})
        bucket["n"] += 1
        bucket["official_a"] += row["official"]
        bucket["official_b"] += rows_b[instance_id]["official"]
    return dict(sorted(out.items()))


def compare_reports(
    report_a: dict[str, Any],
    report_b: dict[str, Any],
    *,
    run_a: str = "A",
    run_b: str = "B",
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int = 0,
    label_a: str = "",
    label_b: str = "",
) -> Comparison:
    """Compare two audit reports (``eval.audit.report.build_report``) of the same task set. Labels default
    to each run's model (or driver) name."""
    if report_a["split"] != report_b["split"]:
        raise CompareError(f"the runs audit different splits ({report_a['split']!r} vs {report_b['split']!r})")
    if report_a["task_set_sha256"] != report_b["task_set_sha256"]:
        raise CompareError(
            "the runs audit different task sets (task_set_sha256 differs); compare runs made over the same tasks"
        )
    if not 0 < alpha < 1:
        raise CompareError(f"alpha must be between 0 and 1, not {alpha}")
    rows_a = {r["instance_id"]: r for r in report_a["episodes"]}
    rows_b = {r["instance_id"]: r for r in report_b["episodes"]}
    ids = sorted(rows_a)
    a = [rows_a[i]["official"] for i in ids]
    b = [rows_b[i]["official"] for i in ids]
    table = paired_table(a, b)
    p_value = mcnemar_exact(table.only_a, table.only_b)
    low, high = paired_bootstrap(a, b, resamples=resamples, seed=seed)
    moves = Counter(f"{rows_a[i]['rung']}->{rows_b[i]['rung']}" for i in ids if rows_a[i]["rung"] != rows_b[i]["rung"])
    label_a = label_a or str(report_a["driver"].get("model") or report_a["driver"].get("name") or "A")
    power = analyse(len(ids), sum(a) / len(ids) if ids else None, f"run A ({label_a})", alpha=alpha)
    return Comparison(
        run_a=run_a,
        run_b=run_b,
        label_a=label_a,
        label_b=label_b or str(report_b["driver"].get("model") or report_b["driver"].get("name") or "B"),
        split=report_a["split"],
        n=len(ids),
        official_a=sum(a),
        official_b=sum(b),
        strict_a=report_a["strict"],
        strict_b=report_b["strict"],
        table=table,
        p_value=p_value,
        alpha=alpha,
        ci_low=low,
        ci_high=high,
        distinguishable=p_value < alpha,
        ladder_a=dict(report_a["ladder"]),
        ladder_b=dict(report_b["ladder"]),
        ladder_labels=dict(report_a["ladder_labels"]),
        rung_moves=dict(sorted(moves.items())),
        by_family=_grouped(rows_a, rows_b, "family"),
        by_repo=_grouped(rows_a, rows_b, "repo"),
        by_kind=_grouped(rows_a, rows_b, "kind", "repair"),
        power=power.to_dict(),
        tasks=[
            {
                "instance_id": i,
                "kind": rows_a[i].get("kind") or "repair",
                "family": rows_a[i].get("family"),
                "repo": rows_a[i].get("repo"),
                "official_a": rows_a[i]["official"],
                "official_b": rows_b[i]["official"],
                "rung_a": rows_a[i]["rung"],
                "rung_b": rows_b[i]["rung"],
            }
            for i in ids
        ],
    )


def compare_runs(a: Path, b: Path, **options: Any) -> Comparison:
    """Compare two audit run folders (read-only)."""
    return compare_reports(build_report(RunDir(a)), build_report(RunDir(b)), run_a=str(a), run_b=str(b), **options)


def power_summary(c: Comparison) -> str:
    """The comparison's minimum detectable effect in one line (eval.audit.power)."""
    return PowerAnalysis.from_dict(c.power).summary()


def to_markdown(c: Comparison) -> str:
    pct = lambda k: f"{k}/{c.n}" + (f" ({100.0 * k / c.n:.1f}%)" if c.n else "")  # noqa: E731
    lines = [
        f"# Transfer comparison: {c.split} split, {c.n} tasks",
        "",
        f"**{c.summary()}**",
        "",
        f"- A = `{c.label_a}` ({c.run_a}): official {pct(c.official_a)}, strict {pct(c.strict_a)}",
        f"- B = `{c.label_b}` ({c.run_b}): official {pct(c.official_b)}, strict {pct(c.strict_b)}",
        f"- difference in pass rate (B − A): {c.difference:+.3f}, paired bootstrap 95% interval "
        f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]",
        f"- exact McNemar on the {c.table.discordant} discordant tasks: p = {c.p_value:.4g} (alpha {c.alpha})",
        *([f"- {power_summary(c)}"] if c.power else []),
        "",
        "## Paired outcomes (official)",
        "",
        "| | B passes | B fails |",
        "|---|---|---|",
        f"| **A passes** | {c.table.both} | {c.table.only_a} |",
        f"| **A fails** | {c.table.only_b} | {c.table.neither} |",
        "",
        "## Failure ladder",
        "",
        "| rung | meaning | A | B |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {r} | {c.ladder_labels[r]} | {c.ladder_a.get(r, 0)} | {c.ladder_b.get(r, 0)} |" for r in c.ladder_labels
    ]
    if c.rung_moves:
        lines += ["", "Tasks that moved rung (A → B): " + ", ".join(f"{m}: {k}" for m, k in c.rung_moves.items())]
    for title, groups in (("By kind", c.by_kind), ("By family", c.by_family), ("By repository", c.by_repo)):
        lines += ["", f"## {title}", "", "| name | n | A | B | B − A |", "|---|---|---|---|---|"]
        lines += [
            f"| {name} | {g['n']} | {g['official_a']} | {g['official_b']} | {g['official_b'] - g['official_a']:+d} |"
            for name, g in groups.items()
        ]
    lines += ["", "## Tasks that differ", ""]
    differ = [t for t in c.tasks if t["official_a"] != t["official_b"]]
    lines += [
        f"- `{t['instance_id']}`: A {t['official_a']} (rung {t['rung_a']}) → B {t['official_b']} (rung {t['rung_b']})"
        for t in differ
    ] or ["- none"]
    return "\n".join(lines) + "\n"


def compare_png(c: Comparison, path: Path) -> Path:
    """Two panels: the ladders side by side, and the pass rate per family for A and B."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rungs = list(c.ladder_labels)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), dpi=100, gridspec_kw={"width_ratios": [3, 2]})
    width = 0.4
    xs = range(len(rungs))
    left.bar(
        [x - width / 2 for x in xs],
        [c.ladder_a.get(r, 0) for r in rungs],
        width,
        label=f"A: {c.label_a}",
        color="#9e9e9e",
    )
    left.bar(
        [x + width / 2 for x in xs],
        [c.ladder_b.get(r, 0) for r in rungs],
        width,
        label=f"B: {c.label_b}",
        color="#1f77b4",
    )
    left.set_xticks(list(xs), [f"{r}" for r in rungs])
    left.set_xlabel("rung (" + "; ".join(f"{r} {c.ladder_labels[r]}" for r in rungs) + ")", fontsize=7, wrap=True)
    left.set_ylabel("episodes")
    left.legend(fontsize=8)
    left.set_title(f"{c.split}: A {c.official_a}/{c.n} vs B {c.official_b}/{c.n}, p = {c.p_value:.3g}", fontsize=10)
    families = list(c.by_family)
    ys = range(len(families))
    rate = lambda g, k: g[k] / g["n"] if g["n"] else 0.0  # noqa: E731
    right.barh(
        [y + width / 2 for y in ys],
        [rate(c.by_family[f], "official_a") for f in families],
        width,
        color="#9e9e9e",
        label="A",
    )
    right.barh(
        [y - width / 2 for y in ys],
        [rate(c.by_family[f], "official_b") for f in families],
        width,
        color="#1f77b4",
        label="B",
    )
    right.set_yticks(list(ys), [f"{f} (n={c.by_family[f]['n']})" for f in families], fontsize=8)
    right.set_xlim(0, 1)
    right.set_xlabel("official pass rate")
    right.set_title("per family", fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    atomic.write_bytes(path, buffer.getvalue())
    return path


def write_comparison(c: Comparison, out: Path) -> dict[str, Path]:
    """Write compare.json, compare.md and compare.png into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "compare.json", "md": out / "compare.md", "png": out / "compare.png"}
    atomic.write_text(paths["json"], json.dumps(c.to_dict(), sort_keys=True, indent=1) + "\n")
    atomic.write_text(paths["md"], to_markdown(c))
    compare_png(c, paths["png"])
    return paths
