"""The experiment's one report: base vs trained, on dev (a report) and on the sealed split (the answer).

Built from the experiment's state (``train.experiment``: every finished step's result) and written as
``report.json`` (everything, machine-readable), ``report.md`` (what a reader needs: the claim, the sealed
paired comparison with its interval and exact p-value, task by task, then Spider 2.0-DBT's sealed part when
the recipe names a checkout (both arms' k/N, the line the official evaluate.py would print, the paired
comparison and every instance that could not be played, named and counted 0), then dev, training and the
gate) and ``report.png`` (pass rates of both arms on every audited split, and the sealed difference with
its interval). ``summarize`` is pure; the writers only write.
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
        **_header(recipe, result),
        "sealed": _paired(result("sealed-base"), result("sealed-trained"), sealed),
        "spider2": _spider2(recipe, result, compare.get("spider2") or {}),
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


def _header(recipe: Any, result: Any) -> dict[str, Any]:
    """The report's identity: the experiment, its claim, its recipe files and the frozen recipe, the power."""
    return {
        "experiment": recipe.name,
        "folder": str(recipe.folder),
        "claim": recipe.claim,
        "recipe_file": str(recipe.source),
        "recipe_sha256": recipe.sha256,
        "recipe": (result("freeze") or {}).get("recipe"),
        "power": result("power"),
    }


def _paired(base: dict[str, Any] | None, trained: dict[str, Any] | None, compared: dict[str, Any]) -> dict[str, Any]:
    """Both arms' audits of one sealed split and their paired comparison (the compare step's)."""
    return {
        "base": base,
        "trained": trained,
        "n": compared.get("n"),
        "difference": compared.get("difference"),
        "ci_low": compared.get("ci_low"),
        "ci_high": compared.get("ci_high"),
        "p_value": compared.get("p_value"),
        "table": compared.get("table"),
        "summary": compared.get("summary"),
        "tasks": compared.get("tasks", []),
    }


def _spider2(recipe: Any, result: Any, compared: dict[str, Any]) -> dict[str, Any] | None:
    """Spider 2.0-DBT's sealed part, both arms and their comparison, and every instance that could not be
    played (an arm's list; the union, with the arms that could not play each); None: no checkout named."""
    if getattr(recipe, "spider2", None) is None:
        return None
    part = _paired(result("spider2-base"), result("spider2-trained"), compared)
    arms: dict[str, dict[str, Any]] = {}
    for arm in ("base", "trained"):
        for row in (part[arm] or {}).get("unplayable", []):
            entry = arms.setdefault(row["instance_id"], {**row, "arms": []})
            entry["arms"].append(arm)
    return {"checkout": str(recipe.spider2), **part, "unplayable": [arms[i] for i in sorted(arms)]}


def _score(arm: dict[str, Any] | None) -> str:
    return f"{arm['official']}/{arm['n']}" if arm else "-"


def _power_lines(power: dict[str, Any] | None) -> list[str]:
    """The power statement the sealed section opens with; an underpowered run says so first."""
    if not power:
        return []
    from dbt_harvest.eval.audit.power import PowerAnalysis

    summary = PowerAnalysis.from_dict(power).summary()
    if power["underpowered"]:
        return [
            f"**This result is underpowered** (run with --allow-underpowered): {summary}. A gain smaller than "
            "that is expected to go unseen, so a result that is not distinguishable from noise says little.",
            "",
        ]
    return [f"Power, stated before the sealed audits: {summary}.", ""]


def _paired_lines(part: dict[str, Any], what: str) -> list[str]:
    """The paired comparison of one sealed split: summary, difference and interval, 2×2 table, task by task."""
    if not part["summary"]:
        return []
    table = part["table"]
    return [
        part["summary"],
        "",
        f"Paired difference (trained − base): {part['difference']:+.3f}, 95% bootstrap interval "
        f"[{part['ci_low']:+.3f}, {part['ci_high']:+.3f}]; both pass {table['both']}, only base {table['only_a']}, "
        f"only trained {table['only_b']}, neither {table['neither']}.",
        "",
        f"| {what} | base | trained | rung (base → trained) |",
        "|---|---|---|---|",
        *[
            f"| `{t['instance_id']}` | {t['official_a']} | {t['official_b']} | {t['rung_a']} → {t['rung_b']} |"
            for t in part["tasks"]
        ],
        "",
    ]


def _evaluate_py(arm: dict[str, Any] | None) -> str:
    return str(arm["evaluate_py"]["says"]) if arm else "-"


def _spider2_lines(part: dict[str, Any] | None) -> list[str]:
    """Spider 2.0-DBT's sealed part: both arms' k/N and evaluate.py's line, the comparison, the unplayable."""
    if part is None:
        return []
    lines = [
        "## Spider 2.0-DBT, sealed part (each arm audited once)",
        "",
        f"Checkout `{part['checkout']}`. k/N is over every instance of the sealed part; the official "
        "evaluate.py divides by the instances submitted only, so its number can only be higher.",
        "",
        "| arm | official | what evaluate.py would print |",
        "|---|---|---|",
        f"| base (no adapter) | {_score(part['base'])} | {_evaluate_py(part['base'])} |",
        f"| trained | {_score(part['trained'])} | {_evaluate_py(part['trained'])} |",
        "",
        *_paired_lines(part, "instance"),
    ]
    unplayable = part["unplayable"]
    if unplayable:
        lines += [f"{len(unplayable)} instance(s) could not be played; each counts 0 in its arm's k/N:", ""]
        lines += [f"- `{u['instance_id']}` ({', '.join(u['arms'])}): {u['reason']}" for u in unplayable]
    else:
        lines.append("Every instance of the sealed part was played by both arms.")
    return [*lines, ""]


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
        *_paired_lines(sealed, "task"),
        *_spider2_lines(report.get("spider2")),
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
    if report.get("spider2"):
        splits.append(("Spider2 sealed", report["spider2"]))
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
