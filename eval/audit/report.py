"""The audit report: k/N over ALL tasks of the split, the ladder, per family and per repository.

N is the task list written in run.json when the run started, never the number of verdicts found: a task
without a verdict is ``missing``, a crashed episode is ``crashed``; both count 0 and are listed by id.
Outputs: ``report.json`` (for machines), ``report.md`` (for people), ``ladder.png`` (matplotlib, Agg).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from eval.audit.rundir import RunDir
from eval.ladder import MISSING, RUNGS
from core import atomic

CRASHED = "crashed"


def _ratio(k: int, n: int) -> str:
    return f"{k}/{n}" + (f" ({100.0 * k / n:.1f}%)" if n else "")


def build_report(run: RunDir) -> dict[str, Any]:
    """Aggregate the run folder into the report's data (pure: reads files, writes nothing)."""
    description = run.read_run()
    tasks = description["tasks"]
    rows = []
    missing, crashed = [], []
    for entry in tasks:
        verdict = run.read_episode(entry["instance_id"])
        if verdict is None:
            missing.append(entry["instance_id"])
            verdict = {**entry, "status": "missing", "official": 0, "strict": 0, "rung": MISSING}
        elif verdict.get("status") == CRASHED:
            crashed.append(entry["instance_id"])
        rows.append({
            **entry, "status": verdict.get("status"), "official": int(bool(verdict.get("official"))),
            "strict": int(bool(verdict.get("strict"))), "rung": int(verdict.get("rung", MISSING)),
            "turns": int(verdict.get("turns", 0) or 0), "invalid_actions": int(verdict.get("invalid_actions", 0) or 0),
            "reason": verdict.get("reason", ""), "error": verdict.get("error", ""),
        })
    n = len(rows)
    ladder = Counter(r["rung"] for r in rows)

    def group(key: str) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = defaultdict(lambda: {"n": 0, "official": 0, "strict": 0})
        for r in rows:
            bucket = out[str(r.get(key) or "?")]
            bucket["n"] += 1
            bucket["official"] += r["official"]
            bucket["strict"] += r["strict"]
        return dict(sorted(out.items()))

    played = [r for r in rows if r["status"] not in ("missing", CRASHED)]
    return {
        "split": description["split"],
        "driver": description["driver"],
        "sealed": description.get("sealed"),
        "task_set_sha256": description["task_set_sha256"],
        "n": n,
        "official": sum(r["official"] for r in rows),
        "strict": sum(r["strict"] for r in rows),
        "ladder": {str(rung): ladder.get(rung, 0) for rung in sorted(RUNGS)},
        "ladder_labels": {str(rung): label for rung, label in RUNGS.items()},
        "missing": missing,
        "crashed": crashed,
        "by_family": group("family"),
        "by_repo": group("repo"),
        "mean_turns": round(sum(r["turns"] for r in played) / len(played), 2) if played else 0.0,
        "invalid_actions": sum(r["invalid_actions"] for r in rows),
        "episodes": rows,
    }


def to_markdown(report: dict[str, Any]) -> str:
    n = report["n"]
    driver = report["driver"]
    lines = [
        f"# Audit: {report['split']} split, driver {driver.get('name')}",
        "",
        f"- driver: `{json.dumps(driver, sort_keys=True)}`",
        f"- tasks: {n} (task set sha256 `{report['task_set_sha256'][:16]}…`)",
        f"- **official: {_ratio(report['official'], n)}**",
        f"- strict: {_ratio(report['strict'], n)}",
        f"- missing: {len(report['missing'])}, crashed: {len(report['crashed'])} (each counts 0)",
        f"- mean turns: {report['mean_turns']}, invalid actions: {report['invalid_actions']}",
    ]
    if report.get("sealed"):
        lines.append(f"- sealed test split, recipe `{report['sealed'].get('recipe')}`")
    lines += ["", "## Failure ladder", "", "| rung | meaning | episodes |", "|---|---|---|"]
    for rung, count in report["ladder"].items():
        lines.append(f"| {rung} | {report['ladder_labels'][rung]} | {count} |")
    for title, key in (("By family", "by_family"), ("By repository", "by_repo")):
        lines += ["", f"## {title}", "", "| name | official | strict |", "|---|---|---|"]
        for name, bucket in report[key].items():
            lines.append(f"| {name} | {_ratio(bucket['official'], bucket['n'])} | {_ratio(bucket['strict'], bucket['n'])} |")
    if report["missing"] or report["crashed"]:
        lines += ["", "## Missing and crashed", ""]
        lines += [f"- missing: `{i}`" for i in report["missing"]]
        by_id = {r["instance_id"]: r for r in report["episodes"]}
        lines += [f"- crashed: `{i}`: {by_id[i].get('error', '')}" for i in report["crashed"]]
    lines += ["", "## Episodes", "", "| task | rung | official | strict | turns | reason |", "|---|---|---|---|---|---|"]
    for r in report["episodes"]:
        reason = " ".join(str(r.get("reason") or r.get("error") or r["status"]).split())[:160].replace("|", "\\|")
        lines.append(f"| `{r['instance_id']}` | {r['rung']} | {r['official']} | {r['strict']} | {r['turns']} | {reason} |")
    return "\n".join(lines) + "\n"


def ladder_png(report: dict[str, Any], path: Path) -> Path:
    """A bar chart of the ladder (matplotlib, Agg backend), written atomically."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rungs = list(report["ladder"])
    counts = [report["ladder"][r] for r in rungs]
    labels = [f"{r}\n{report['ladder_labels'][r]}" for r in rungs]
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=100)
    colors = ["#9e9e9e", "#d62728", "#ff7f0e", "#e6b800", "#bcbd22", "#1f77b4", "#2ca02c"][: len(rungs)]
    bars = ax.bar(range(len(rungs)), counts, color=colors)
    ax.set_xticks(range(len(rungs)), labels, fontsize=7)
    ax.set_ylabel("episodes")
    ax.set_title(
        f"{report['split']} / {report['driver'].get('name')}: official {report['official']}/{report['n']}, "
        f"strict {report['strict']}/{report['n']}"
    )
    for bar, count in zip(bars, counts):
        ax.annotate(str(count), (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    atomic.write_bytes(path, buffer.getvalue())
    return path


def write_report(run: RunDir) -> dict[str, Any]:
    """Write report.json, report.md and ladder.png into the run folder; return the report."""
    report = build_report(run)
    atomic.write_text(run.root / "report.json", json.dumps(report, sort_keys=True, indent=1) + "\n")
    atomic.write_text(run.root / "report.md", to_markdown(report))
    ladder_png(report, run.root / "ladder.png")
    return report
