"""The experiment's one report: base vs trained, on dev (a report) and on the sealed split (the answer).

Built from the experiment's state (``train.experiment``: every finished step's result) and written as
``report.json`` (everything, machine-readable), ``report.md`` (what a reader needs: the claim, the sealed
paired comparison with its interval and exact p-value, task by task, then dev, training and the gate) and
``report.png`` (pass rates of both arms on both splits, and the sealed difference with its interval).
``summarize`` is pure; the writers only write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic


def summarize(recipe: Any, state: dict[str, Any]) -> dict[str, Any]:
    """The report's content from the recipe and the experiment state."""
    steps = state["steps"]

    def result(step: str) -> dict[str, Any] | None:
        return steps[step]["result"] if step in steps else None

    compare = result("compare") or {}
    sealed = compare.get("sealed") or {}
    return {
        "experiment": recipe.name,
        "folder": str(recipe.folder),
        "claim": recipe.claim,
        "recipe_file": str(recipe.source),
        "recipe_sha256": recipe.sha256,
        "recipe": (result("freeze") or {}).get("recipe"),
        "power": result("power"),
        "sealed": {
            "base": result("sealed-base"),
            "trained": result("sealed-trained"),
            "n": sealed.get("n"),
            "difference": sealed.get("difference"),
            "ci_low": sealed.get("ci_low"),
            "ci_high": sealed.get("ci_high"),
            "p_value": sealed.get("p_value"),
            "table": sealed.get("table"),
            "summary": sealed.get("summary"),
            "tasks": sealed.get("tasks", []),
        },
        "dev": {
            "base": result("dev-base"),
            "trained": result("dev-trained"),
            "summary": (compare.get("dev") or {}).get("summary"),
            "difference": (compare.get("dev") or {}).get("difference"),
        },
        "training": {"sft": result("sft"), "grpo": result("grpo")},
        "gate": {"sft": result("gate-sft"), "grpo": result("gate-grpo")},
        "seconds": {step: info["seconds"] for step, info in steps.items()},
    }


def _score(arm: dict[str, Any] | None) -> str:
    return f"{arm['official']}/{arm['n']}" if arm else "-"


def _power_lines(power: dict[str, Any] | None) -> list[str]:
    """The power statement the sealed section opens with; an underpowered run says so first."""
    if not power:
        return []
    from dbt_harvest.eval.audit.power import PowerAnalysis

    fields = {k: v for k, v in power.items() if k not in ("underpowered", "allowed_underpowered")}
    summary = PowerAnalysis(**fields).summary()
    if power["underpowered"]:
        return [
            f"**This result is underpowered** (run with --allow-underpowered): {summary}. A gain smaller than "
            "that is expected to go unseen, so a result that is not distinguishable from noise says little.",
            "",
        ]
    return [f"Power, stated before the sealed audits: {summary}.", ""]


def to_markdown(report: dict[str, Any]) -> str:
    sealed, dev = report["sealed"], report["dev"]
    lines = [
        f"# Experiment {report['experiment']}",
        "",
        f"Claim under test: {report['claim']}",
        "",
        f"Recipe `{report['recipe']}` (experiment recipe sha256 {report['recipe_sha256'][:12]}).",
        "",
        "## Sealed test split (each arm audited once)",
        "",
        *_power_lines(report.get("power")),
        "| arm | official |",
        "|---|---|",
        f"| base (no adapter) | {_score(sealed['base'])} |",
        f"| trained | {_score(sealed['trained'])} |",
        "",
    ]
    if sealed["summary"]:
        table = sealed["table"]
        lines += [
            sealed["summary"],
            "",
            f"Paired difference (trained − base): {sealed['difference']:+.3f}, 95% bootstrap interval "
            f"[{sealed['ci_low']:+.3f}, {sealed['ci_high']:+.3f}]; both pass {table['both']}, only base {table['only_a']}, "
            f"only trained {table['only_b']}, neither {table['neither']}.",
            "",
            "| task | base | trained | rung (base → trained) |",
            "|---|---|---|---|",
            *[
                f"| `{t['instance_id']}` | {t['official_a']} | {t['official_b']} | {t['rung_a']} → {t['rung_b']} |"
                for t in sealed["tasks"]
            ],
            "",
        ]
    lines += ["## Dev split (a report, never a selection signal)", ""]
    if dev["base"] or dev["trained"]:
        lines += [f"- base {_score(dev['base'])}, trained {_score(dev['trained'])}"]
        if dev["summary"]:
            lines.append(f"- {dev['summary']}")
    else:
        lines.append("- not audited ([experiment] dev = false)")
    lines += ["", "## Training and gate", ""]
    for kind in ("sft", "grpo"):
        run = report["training"][kind]
        if run:
            lines.append(
                f"- {kind}: `{run['run_dir']}`"
                + (f", {run['rows']} rows, {run['rows_left_out']} left out" if run.get("rows") is not None else "")
            )
        gate = report["gate"][kind]
        if gate:
            lines.append(
                f"  - gate: one step {gate['step_seconds']:.2f} s, peak memory "
                f"{gate['peak_memory_bytes'] / 2**30:.2f} GiB ({gate['peak_memory_source']}), "
                f"{gate['total_steps']} steps projected at {gate['projected_seconds']:.0f} s"
            )
    lines += ["", "## Wall time per step", "", *[f"- {step}: {sec} s" for step, sec in report["seconds"].items()], ""]
    return "\n".join(lines)


def write_png(report: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), gridspec_kw={"width_ratios": [2, 1]})
    splits = [("dev", report["dev"]), ("sealed test", report["sealed"])]
    for offset, arm, color in ((-0.2, "base", "#9e9e9e"), (0.2, "trained", "#1f77b4")):
        rates = [(s[arm]["official"] / s[arm]["n"]) if s.get(arm) and s[arm]["n"] else 0.0 for _, s in splits]
        left.bar([i + offset for i in range(len(splits))], rates, width=0.4, color=color, label=arm)
    left.set_xticks(range(len(splits)), [name for name, _ in splits])
    left.set_ylim(0, 1)
    left.set_ylabel("official pass rate")
    left.legend(loc="upper left")
    sealed = report["sealed"]
    if sealed["difference"] is not None:
        d = sealed["difference"]
        right.errorbar(
            [0], [d], yerr=[[d - sealed["ci_low"]], [sealed["ci_high"] - d]], fmt="o", capsize=6, color="#1f77b4"
        )
        right.axhline(0, color="#555555", linewidth=0.8)
        right.set_xlim(-1, 1)
        right.set_xticks([])
        right.set_title(f"sealed: trained − base\n95% interval, p = {sealed['p_value']:.3g}", fontsize=9)
    fig.suptitle(f"experiment {report['experiment']}", fontsize=10)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path


def write_report(folder: Path, recipe: Any, state: dict[str, Any]) -> dict[str, Path]:
    report = summarize(recipe, state)
    paths = {"json": folder / "report.json", "md": folder / "report.md", "png": folder / "report.png"}
    atomic.write_text(paths["json"], json.dumps(report, sort_keys=True, indent=1) + "\n")
    atomic.write_text(paths["md"], to_markdown(report))
    write_png(report, paths["png"])
    return paths
