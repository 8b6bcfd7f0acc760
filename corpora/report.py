"""The corpus report: per repository and per operator family, what minting the pins produced.

For each pin: its split and group (from the ledger), candidates, kept, screening and confirmation
rejections by reason, silent vs loud kept tasks, kept tasks with an informative wrong repair, and
(when a timings file from the rebuild driver is given) the wall time of its build and of its mint.
Per family the same counts summed. Rendered as a markdown table (:func:`markdown`) and a PNG bar
chart (:func:`chart`), both written by `harvest corpus report --out DIR`; the dataset card embeds the
markdown when the folder holds one (``corpus_report.md``).

Everything comes from the mint's own reports under HARVEST_HOME (``harvester.mint.pipeline.yield_report``)
and the committed ledger; the report reads no task content, so the sealed split appears only as counts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from dbt_harvest.core.pin import Pin, list_pins
from dbt_harvest.corpora.errors import CorporaError
from dbt_harvest.corpora.ledger import SplitLedger

FAMILY_ORDER = ("filter", "null", "join", "grain", "time", "values")
REPORT_MD = "corpus_report.md"
REPORT_PNG = "corpus_report.png"
REPORT_JSON = "corpus_report.json"


@dataclass(frozen=True)
class RepoRow:
    pin: str
    repo: str
    license: str
    split: str
    group: str
    candidates: int
    kept: int
    kept_per_family: dict[str, int]
    screened_out: dict[str, int]
    confirm_rejected: dict[str, int]
    left_at_cap: int
    silent: int
    loud: int
    informative: int
    add_s: float | None = None
    mint_s: float | None = None
    partial: bool = False
    # kept tasks per local_tests bucket (core.task_record.LOCAL_TESTS_BUCKETS); {} in rows carried from a
    # report made before it was counted
    local_tests: dict[str, int] = field(default_factory=dict)
    # where the pin's data comes from (``repository``, ``augmented``, ``synthesized``) and the dialect its SQL
    # was written in (``native``, ``ported:<dialect>``): issue 60's yield per origin and per dialect
    origin: str = "repository"
    dialect: str = "native"

    @property
    def yield_rate(self) -> float | None:
        return self.kept / self.candidates if self.candidates else None

    @property
    def label(self) -> str:
        """The repository as a table row shows it: an augmented pin's row (its recovered candidates on
        added seed rows) is marked, since its repository has a row of its own."""
        return f"{self.repo} (augmented)" if "+aug-" in self.pin else self.repo


@dataclass(frozen=True)
class CorpusReport:
    rows: tuple[RepoRow, ...]
    families: dict[str, dict[str, Any]] = field(default_factory=dict)

    def total(self, key: str) -> int:
        return sum(int(getattr(r, key)) for r in self.rows)

    def per_split(self) -> dict[str, int]:
        out = {"train": 0, "dev": 0, "test": 0}
        for r in self.rows:
            out[r.split] = out.get(r.split, 0) + r.kept
        return out

    def per_split_family(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for r in self.rows:
            row = out.setdefault(r.split, {})
            for fam, n in r.kept_per_family.items():
                row[fam] = row.get(fam, 0) + n
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [asdict(r) for r in self.rows],
            "families": self.families,
            "per_split": self.per_split(),
            "per_split_family": self.per_split_family(),
        }


def _sum_into(target: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        target[k] = target.get(k, 0) + int(v)


def build_report(
    pins: Sequence[Pin],
    ledger: SplitLedger,
    timings: Mapping[str, Mapping[str, float]] | None = None,
    partial: Sequence[str] = (),
    kind: str | None = "repair",
) -> CorpusReport:
    """The report of ``pins`` from the mint reports under HARVEST_HOME (see the module docstring), of one
    task ``kind`` (a completion's candidates are the models it decided; None: both kinds together)."""
    from dbt_harvest.harvester.mint.pipeline import yield_report

    timings = timings or {}
    rows = []
    families: dict[str, dict[str, Any]] = {}
    for pin in pins:
        rep = yield_report([pin.id], kind)
        assignment = ledger.assignment(pin)
        kept_fam: dict[str, int] = {}
        screened: dict[str, int] = {}
        rejected: dict[str, int] = {}
        cap = candidates = 0
        for fam, row in rep["families"].items():
            candidates += row["candidates"]
            cap += row["not_confirmed_cap"]
            if row["kept"]:
                kept_fam[fam] = row["kept"]
            _sum_into(screened, row["screened_out"])
            _sum_into(rejected, row["confirm_rejected"])
            agg = families.setdefault(
                fam,
                {"candidates": 0, "kept": 0, "screened_out": {}, "confirm_rejected": {}, "left_at_cap": 0, "repos": 0},
            )
            agg["candidates"] += row["candidates"]
            agg["kept"] += row["kept"]
            agg["left_at_cap"] += row["not_confirmed_cap"]
            agg["repos"] += bool(row["kept"])
            _sum_into(agg["screened_out"], row["screened_out"])
            _sum_into(agg["confirm_rejected"], row["confirm_rejected"])
        if kind == "completion" and not candidates:
            continue  # a pin that never minted completions (the sealed test split, augmented pins) has no row
        t = timings.get(pin.id, {})
        rows.append(
            RepoRow(
                pin=pin.id,
                repo=pin.id.split("@", 1)[0].replace("__", "/", 1),
                license=pin.license,
                split=assignment.split if assignment else "-",
                group=assignment.group if assignment else "-",
                candidates=candidates,
                kept=sum(kept_fam.values()),
                kept_per_family=dict(sorted(kept_fam.items())),
                screened_out=dict(sorted(screened.items())),
                confirm_rejected=dict(sorted(rejected.items())),
                left_at_cap=cap,
                silent=rep["silent"],
                loud=rep["loud"],
                informative=rep["quality"]["informative_wrong_repair"],
                add_s=t.get("add_s"),
                mint_s=t.get("mint_s"),
                partial=pin.id in partial,
                local_tests=dict(rep["quality"].get("local_tests", {})),
                origin=pin.data_origin,
                dialect=pin.dialect,
            )
        )
    return CorpusReport(tuple(rows), dict(sorted(families.items())))


class ReportCarryError(CorporaError):
    """A previous report cannot be carried over into this one (see :func:`carry_over`)."""


#: the counts of a row (what a faithful re-mint reproduces; timings and the partial flag may differ)
COUNTS = (
    "candidates",
    "kept",
    "kept_per_family",
    "screened_out",
    "confirm_rejected",
    "left_at_cap",
    "silent",
    "loud",
    "informative",
)


def carry_over(
    fresh: CorpusReport,
    previous: Mapping[str, Any],
    pins: Sequence[Pin],
    ledger: SplitLedger,
    minted_here: set[str],
    reminted: Sequence[RepoRow] = (),
) -> CorpusReport:
    """``fresh`` (the pins minted in this home) plus every other pin's row from ``previous`` (a report's
    JSON): a corpus grows by minting new repositories in a home that never minted the old ones.

    A carried row keeps its counts and timings; its split is checked against the ledger (a row reserved
    elsewhere since is refused, unless the ledger's recorded redraw moved it: then it is counted in its new split). Family totals add the previous report's, which are sums over its pins.
    A pin of the previous report minted again here (``reminted``, e.g. re-minted to augment it) must give
    the counts its previous row has: then that row is carried and its family counts, already in the
    previous totals, are not added twice; other counts are refused, since the totals cannot be split."""
    by_id = {p.id: p for p in pins}
    old_rows = {str(r["pin"]): r for r in previous.get("rows", [])}
    again = sorted(set(old_rows) & minted_here)
    if again:
        raise ReportCarryError(
            f"{len(again)} pin(s) of the previous report were minted again in this home ({again[0]}, ...): report "
            "from one home that minted them all, or without --carry"
        )
    for row in reminted:
        old = old_rows.get(row.pin)
        if old is None:
            raise ReportCarryError(f"{row.pin}: not in the previous report, so it is not minted again")
        differ = [k for k in COUNTS if old.get(k) != getattr(row, k)]
        if differ:
            raise ReportCarryError(
                f"{row.pin} was minted again in this home with other counts than the previous report ({differ[0]}: "
                f"{old.get(differ[0])} before, {getattr(row, differ[0])} here): report from one home that minted "
                "them all, or without --carry"
            )
    rows = list(fresh.rows)
    for pin_id, data in sorted(old_rows.items()):
        if pin_id not in by_id:
            continue  # no longer pinned
        assignment = ledger.assignment(by_id[pin_id])
        split = assignment.split if assignment else "-"
        redrawn = assignment is not None and ledger.events[assignment.seq].action == "force"
        if split != data["split"] and not redrawn:
            raise ReportCarryError(f"{pin_id}: the previous report has it in {data['split']}, the ledger in {split}")
        # a split is an assignment, not a measurement: a row a redraw moved keeps its counts in its new split
        carried = replace(RepoRow(**{k: data[k] for k in RepoRow.__dataclass_fields__ if k in data}), split=split)
        # the pin says where its data comes from: a row from before origins were counted reads it from there
        rows.append(replace(carried, origin=by_id[pin_id].data_origin, dialect=by_id[pin_id].dialect))
    families = {fam: dict(agg) for fam, agg in fresh.families.items()}
    for fam, agg in previous.get("families", {}).items():
        into = families.setdefault(
            fam, {"candidates": 0, "kept": 0, "screened_out": {}, "confirm_rejected": {}, "left_at_cap": 0, "repos": 0}
        )
        for key in ("candidates", "kept", "left_at_cap", "repos"):
            into[key] = int(into.get(key, 0)) + int(agg.get(key, 0))
        for key in ("screened_out", "confirm_rejected"):
            merged = dict(into.get(key, {}))
            _sum_into(merged, agg.get(key, {}))
            into[key] = merged
    order = {p.id: i for i, p in enumerate(pins)}
    return CorpusReport(tuple(sorted(rows, key=lambda r: order.get(r.pin, len(order)))), dict(sorted(families.items())))


def report_from_disk(
    pins_dir: Path, timings_path: Path | None = None, carry: Path | None = None, kind: str = "repair"
) -> CorpusReport:
    """The report of every pin under ``pins_dir`` (partial pins from the committed task lock). With
    ``carry`` (a previous ``corpus_report.json``), pins this home never minted keep that report's rows."""
    from dbt_harvest.core.home import mint_dir
    from dbt_harvest.corpora.tasklock import read_lock

    timings = json.loads(timings_path.read_text(encoding="utf-8")) if timings_path else {}
    lock = read_lock(pins_dir)
    pins = list_pins(pins_dir)
    ledger = SplitLedger.load(pins_dir)
    partial = lock.partial if lock else ()
    if carry is None:
        return build_report(pins, ledger, timings, partial, kind)
    previous = json.loads(carry.read_text(encoding="utf-8"))
    minted_here = {p.id for p in pins if mint_dir(p.id).is_dir()}
    before = {str(r["pin"]) for r in previous.get("rows", [])}
    fresh = build_report([p for p in pins if p.id in minted_here - before], ledger, timings, partial, kind)
    again = build_report([p for p in pins if p.id in minted_here & before], ledger, timings, partial, kind)
    return carry_over(fresh, previous, pins, ledger, minted_here - before, reminted=again.rows)


def _top(reasons: Mapping[str, int], n: int = 2) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:n]) or "-"


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def markdown(report: CorpusReport) -> str:
    """The report as markdown: the per-repository table, the per-family table, totals per split."""
    fams = [f for f in FAMILY_ORDER if f in report.families] + [f for f in report.families if f not in FAMILY_ORDER]
    lines = [
        "| repository | split | license | candidates | kept | "
        + " | ".join(fams)
        + " | yield | silent/loud | informative | top screen rejections | build s | mint s |",
        "|---|---|---|---|---|" + "---|" * len(fams) + "---|---|---|---|---|---|",
    ]
    for r in sorted(report.rows, key=lambda r: (r.split, r.repo.lower())):
        rate = "-" if r.yield_rate is None else f"{100 * r.yield_rate:.0f}%"
        mint = _secs(r.mint_s) + (" (budget)" if r.partial else "")
        lines.append(
            f"| {r.label} | {r.split} | {r.license} | {r.candidates} | {r.kept} | "
            + " | ".join(str(r.kept_per_family.get(f, 0)) for f in fams)
            + f" | {rate} | {r.silent}/{r.loud} | {r.informative} | {_top(r.screened_out)} | "
            f"{_secs(r.add_s)} | {mint} |"
        )
    lines += [
        "",
        "| family | candidates | kept | repositories with a kept task | left at the per-model cap | "
        "top screen rejections | confirm rejections |",
        "|---|---|---|---|---|---|---|",
    ]
    for fam in fams:
        f = report.families[fam]
        lines.append(
            f"| {fam} | {f['candidates']} | {f['kept']} | {f['repos']} | {f['left_at_cap']} | "
            f"{_top(f['screened_out'], 3)} | {_top(f['confirm_rejected'], 3)} |"
        )
    split = report.per_split()
    repositories = {r.repo for r in report.rows}  # an augmented pin's row is its repository's too
    contributing = len({r.repo for r in report.rows if r.kept})
    lines += [
        "",
        f"Kept tasks: {report.total('kept')} of {report.total('candidates')} candidates "
        f"(train {split.get('train', 0)}, dev {split.get('dev', 0)}, test {split.get('test', 0)}); "
        f"{contributing} of {len(repositories)} repositories contribute; silent {report.total('silent')}, "
        f"loud {report.total('loud')}; with an informative wrong repair {report.total('informative')}.",
    ]
    lines += origin_lines(report)
    lines += local_tests_lines(report)
    return "\n".join(lines) + "\n"


def origin_lines(report: CorpusReport) -> list[str]:
    """The yield per data origin and dialect: the repository's own data or data augmented or synthesized
    from it, SQL as written or ported from a warehouse (a row per pair present)."""
    groups: dict[tuple[str, str], list[RepoRow]] = {}
    for r in report.rows:
        groups.setdefault((r.origin, r.dialect), []).append(r)
    lines = [
        "",
        "| data origin | dialect | repositories | candidates | kept | yield |",
        "|---|---|---|---|---|---|",
    ]
    for (origin, dialect), rows in sorted(groups.items()):
        candidates, kept = sum(r.candidates for r in rows), sum(r.kept for r in rows)
        rate = f"{100 * kept / candidates:.0f}%" if candidates else "-"
        lines.append(f"| {origin} | {dialect} | {len({r.repo for r in rows})} | {candidates} | {kept} | {rate} |")
    return lines


def local_tests_lines(report: CorpusReport) -> list[str]:
    """The strength of the kept tasks' local checks: how many dbt tests cover each broken lineage, per split
    (rows carried from a report made before this was counted are not in it, and the line says how many)."""
    from dbt_harvest.core.task_record import LOCAL_TESTS_BUCKETS

    counted = [r for r in report.rows if r.local_tests]
    if not counted:
        return []
    splits = [s for s in ("train", "dev", "test") if any(r.split == s for r in counted)]
    lines = ["", "| covering dbt tests (`local_tests`) | " + " | ".join(splits) + " |", "|---|" + "---|" * len(splits)]
    for bucket in LOCAL_TESTS_BUCKETS:
        lines.append(
            f"| {bucket} | "
            + " | ".join(str(sum(r.local_tests.get(bucket, 0) for r in counted if r.split == s)) for s in splits)
            + " |"
        )
    missing = sum(r.kept for r in report.rows if r.kept and not r.local_tests)
    if missing:
        lines.append(f"\n({missing} kept tasks of rows carried from an older report are not counted here.)")
    return lines


def chart(report: CorpusReport, path: Path) -> Path:
    """A horizontal stacked bar chart of kept tasks per repository and family, written as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = [f for f in FAMILY_ORDER if f in report.families] + [f for f in report.families if f not in FAMILY_ORDER]
    rows = sorted(report.rows, key=lambda r: (r.split, r.repo.lower()), reverse=True)
    fig, ax = plt.subplots(figsize=(9, max(3.0, 0.28 * len(rows) + 1.2)))
    left = [0] * len(rows)
    labels = [f"{r.label} [{r.split}]" for r in rows]
    for fam in fams:
        values = [r.kept_per_family.get(fam, 0) for r in rows]
        ax.barh(labels, values, left=left, label=fam)
        left = [a + b for a, b in zip(left, values)]
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("kept tasks")
    ax.set_title(f"dbt-harvest corpus: {report.total('kept')} kept tasks over {len(rows)} repositories")
    if fams:
        ax.legend(loc="lower right", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def write_report(report: CorpusReport, out: Path) -> dict[str, Path]:
    """Write ``corpus_report.md``, ``.json`` and ``.png`` into ``out``."""
    from dbt_harvest.core import atomic

    out.mkdir(parents=True, exist_ok=True)
    md = out / REPORT_MD
    atomic.write_text(md, markdown(report))
    js = out / REPORT_JSON
    atomic.write_text(js, json.dumps(report.to_dict(), indent=1, sort_keys=True) + "\n")
    png = chart(report, out / REPORT_PNG)
    return {"markdown": md, "json": js, "png": png}
