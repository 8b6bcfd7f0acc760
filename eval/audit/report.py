"""The audit report: k/N over ALL tasks of the split, the ladder, per kind, per family and per repository.

N is the task list written in run.json when the run started, never the number of verdicts found: a task
without a verdict is ``missing``, a crashed episode is ``crashed``; both count 0 and are listed by id.
Outputs: ``report.json`` (for machines), ``report.md`` (for people), ``ladder.png`` (matplotlib, Agg).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.eval.audit.rundir import RunDir, kinds_label
from dbt_harvest.eval.ladder import MISSING, RUNGS

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
        rows.append(
            {
                **entry,
                "status": verdict.get("status"),
                "official": int(bool(verdict.get("official"))),
                "strict": int(bool(verdict.get("strict"))),
                "rung": int(verdict.get("rung", MISSING)),
                "turns": int(verdict.get("turns", 0) or 0),
                "invalid_actions": int(verdict.get("invalid_actions", 0) or 0),
                "reason": verdict.get("reason", ""),
                "error": verdict.get("error", ""),
            }
        )
    n = len(rows)
    ladder = Counter(r["rung"] for r in rows)

    def group(key: str, default: str = "?") -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = defaultdict(lambda: {"n": 0, "official": 0, "strict": 0})
        for r in rows:
            bucket = out[str(r.get(key) or default)]
            bucket["n"] += 1
            bucket["official"] += r["official"]
            bucket["strict"] += r["strict"]
        return dict(sorted(out.items()))

    played = [r for r in rows if r["status"] not in ("missing", CRASHED)]
    submitted = [r for r in rows if r["status"] == "submitted"]
    return {
        "split": description["split"],
        "kinds": description.get("kinds"),  # `harvest audit --kind`: the kinds audited; None: every kind of the split
        "driver": description["driver"],
        "sealed": description.get("sealed"),
        "task_set_sha256": description["task_set_sha256"],
        "n": n,
        "official": sum(r["official"] for r in rows),
        "strict": sum(r["strict"] for r in rows),
        # Spider2's evaluate.py divides by the instances submitted; k/N above divides by all of them
        "submitted": len(submitted),
        "benchmark": description.get("benchmark", "corpus"),
        "ladder": {str(rung): ladder.get(rung, 0) for rung in sorted(RUNGS)},
        "ladder_labels": {str(rung): label for rung, label in RUNGS.items()},
        "missing": missing,
        "crashed": crashed,
        "by_kind": group("kind", "repair"),  # a run folder written before completions existed: all repairs
        "by_family": group("family"),
        "by_repo": group("repo"),
        "mean_turns": round(sum(r["turns"] for r in played) / len(played), 2) if played else 0.0,
        "invalid_actions": sum(r["invalid_actions"] for r in rows),
        "episodes": rows,
    }


def to_markdown(report: dict[str, Any]) -> str:
    n = report["n"]
    driver = report["driver"]
    only = f" ({kinds_label(report['kinds'])})" if report.get("kinds") else ""
    lines = [
        f"# Audit: {report['split']} split{only}, driver {driver.get('name')}",
        "",
        f"- driver: `{json.dumps(driver, sort_keys=True)}`",
        f"- kinds: {kinds_label(report.get('kinds'))}",
        f"- tasks: {n} (task set sha256 `{report['task_set_sha256'][:16]}…`)",
        f"- **official: {_ratio(report['official'], n)}**",
        f"- strict: {_ratio(report['strict'], n)}",
        f"- submitted: {report['submitted']} of {n}"
        + (
            f" (evaluate.py divides by the submitted: {_ratio(report['official'], report['submitted'])})"
            if report.get("benchmark") == "spider2-dbt"
            else ""
        ),
        f"- missing: {len(report['missing'])}, crashed: {len(report['crashed'])} (each counts 0)",
        f"- mean turns: {report['mean_turns']}, invalid actions: {report['invalid_actions']}",
    ]
    if report.get("sealed"):
        what = "sealed Spider2 part" if report.get("benchmark") == "spider2-dbt" else "sealed test split"
        lines.append(
            f"- {what}, recipe `{report['sealed'].get('recipe')}`, arm {report['sealed'].get('arm') or 'recipe'}"
        )
    lines += ["", "## Failure ladder", "", "| rung | meaning | episodes |", "|---|---|---|"]
    for rung, count in report["ladder"].items():
        lines.append(f"| {rung} | {report['ladder_labels'][rung]} | {count} |")
    for title, key in (("By kind", "by_kind"), ("By family", "by_family"), ("By repository", "by_repo")):
        lines += ["", f"## {title}", "", "| name | official | strict |", "|---|---|---|"]
        for name, bucket in (report.get(key) or {}).items():
            lines.append(
                f"| {name} | {_ratio(bucket['official'], bucket['n'])} | {_ratio(bucket['strict'], bucket['n'])} |"
            )
    if report["missing"] or report["crashed"]:
        lines += ["", "## Missing and crashed", ""]
        lines += [f"- missing: `{i}`" for i in report["missing"]]
        by_id = {r["instance_id"]: r for r in report["episodes"]}
        lines += [f"- crashed: `{i}`: {by_id[i].get('error', '')}" for i in report["crashed"]]
    lines += [
        "",
        "## Episodes",
        "",
        "| task | rung | official | strict | turns | reason |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["episodes"]:
        reason = " ".join(str(r.get("reason") or r.get("error") or r["status"]).split())[:160].replace("|", "\\|")
        lines.append(
            f"| `{r['instance_id']}` | {r['rung']} | {r['official']} | {r['strict']} | {r['turns']} | {reason} |"
        )
    return "\n".join(lines) + "\n"


def ladder_figure(report: dict[str, Any]) -> Any:
    """The ladder chart as a matplotlib Figure (Agg): left, one horizontal bar per rung, its meaning as the
    row label (one row each, so labels cannot overlap); right, official and strict k/N per family."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rungs = list(report["ladder"])
    counts = [report["ladder"][r] for r in rungs]
    labels = [textwrap.fill(f"{r}: {report['ladder_labels'][r]}", 28) for r in rungs]
    families = report.get("by_family") or {}
    rows = max(len(rungs), len(families), 1)
    fig, (ladder, per_family) = plt.subplots(
        1, 2, figsize=(12, 1.2 + 0.5 * rows), dpi=100, gridspec_kw={"width_ratios": [1.15, 1]}
    )
    colors = ["#9e9e9e", "#d62728", "#ff7f0e", "#e6b800", "#bcbd22", "#1f77b4", "#2ca02c"][: len(rungs)]
    bars = ladder.barh(range(len(rungs)), counts, color=colors)
    ladder.set_yticks(range(len(rungs)), labels, fontsize=8)
    ladder.invert_yaxis()  # rung 0 on top, the pass at the bottom
    ladder.set_xlabel("episodes")
    ladder.set_title("failure ladder", fontsize=10)
    ladder.set_xlim(0, max([*counts, 1]) * 1.15)
    for bar, count in zip(bars, counts):
        ladder.annotate(
            str(count),
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    names = list(families)
    if names:
        y = range(len(names))
        official = [families[f]["official"] / families[f]["n"] if families[f]["n"] else 0.0 for f in names]
        strict = [families[f]["strict"] / families[f]["n"] if families[f]["n"] else 0.0 for f in names]
        per_family.barh([i - 0.2 for i in y], official, height=0.4, color="#2ca02c", label="official")
        per_family.barh([i + 0.2 for i in y], strict, height=0.4, color="#1f77b4", label="strict")
        per_family.set_yticks(list(y), [f"{f} (n={families[f]['n']})" for f in names], fontsize=8)
        for i, f in enumerate(names):
            text = f"{families[f]['official']}/{families[f]['n']} · {families[f]['strict']}/{families[f]['n']}"
            per_family.annotate(
                text,
                (max(official[i], strict[i]), i),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize=7,
            )
        per_family.invert_yaxis()
        per_family.legend(loc="lower right", fontsize=7)
    per_family.set_xlim(0, 1.3)
    per_family.set_xlabel("k/N (official, strict)")
    per_family.set_title("per family", fontsize=10)
    fig.suptitle(
        f"{report['split']} / {report['driver'].get('name')}: official {report['official']}/{report['n']}, "
        f"strict {report['strict']}/{report['n']}",
        fontsize=11,
    )
    fig.tight_layout()
    return fig


def ladder_png(report: dict[str, Any], path: Path) -> Path:
    """The ladder chart (:func:`ladder_figure`) as a PNG, written atomically."""
    import io

    import matplotlib.pyplot as plt

    fig = ladder_figure(report)
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
