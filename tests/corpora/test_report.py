"""The corpus report: counts from the mint's own reports, per repository and family, as markdown and PNG."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cli import main
from corpora.ledger import Params, SplitLedger, assign
from corpora.report import build_report, markdown
from harvester.mint.pipeline import reports_dir


def _report(pin_id: str, n: int, family: str, stage: str, kept: bool, reason: str = "", **more) -> None:
    folder = reports_dir(pin_id)
    folder.mkdir(parents=True, exist_ok=True)
    row = {"pin": pin_id, "operator": f"{family}.op", "family": family, "stage": stage, "kept": kept,
           "reason": reason, "model": f"model.x.m{n}", **more}
    (folder / f"{n:04d}.json").write_text(json.dumps(row))


def test_report_counts_kept_rejections_and_quality_per_repository_and_family(world, make, tmp_path):
    a, b = make("acme/shop"), make("other/ledger", license="unknown")
    assign(world.pins, Params(0, 0, 0, test_groups=("other/ledger",)))
    _report(a.id, 1, "join", "confirm", True, task_id="t1", silent=True, informative=True, local_tests=2)
    _report(a.id, 2, "join", "screen", False, "equivalent")
    _report(a.id, 3, "grain", "screen", False, "equivalent")
    _report(a.id, 4, "grain", "confirm", False, "mutant_passes")
    _report(b.id, 1, "filter", "confirm", True, task_id="t2", silent=False, informative=False, local_tests=0)
    report = build_report([a, b], SplitLedger.load(world.pins), {a.id: {"add_s": 12.5, "mint_s": 60.0}}, [b.id])
    rows = {r.repo: r for r in report.rows}
    shop = rows["acme/shop"]
    assert (shop.split, shop.candidates, shop.kept, shop.kept_per_family) == ("train", 4, 1, {"join": 1})
    assert shop.screened_out == {"equivalent": 2} and shop.confirm_rejected == {"mutant_passes": 1}
    assert (shop.silent, shop.loud, shop.informative, shop.add_s) == (1, 0, 1, 12.5)
    assert rows["other/ledger"].split == "test" and rows["other/ledger"].partial and rows["other/ledger"].loud == 1
    assert report.per_split() == {"train": 1, "dev": 0, "test": 1}
    assert report.families["grain"] == {"candidates": 2, "kept": 0, "screened_out": {"equivalent": 1},
                                        "confirm_rejected": {"mutant_passes": 1}, "left_at_cap": 0, "repos": 0}
    text = markdown(report)
    assert "| acme/shop | train | MIT | 4 | 1 |" in text and "25%" in text and "(budget)" in text
    assert "Kept tasks: 2 of 5 candidates (train 1, dev 0, test 1); 2 of 2 repositories contribute" in text

    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["corpus", "report", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["per_split"] == {"train": 1, "dev": 0, "test": 1}
    assert (out / "corpus_report.png").read_bytes()[:4] == b"\x89PNG" and "acme/shop" in (out / "corpus_report.md").read_text()
