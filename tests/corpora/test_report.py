"""The corpus report: counts from the mint's own reports, per repository and family, as markdown and PNG."""

from __future__ import annotations

import json

from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.corpora.ledger import Params, SplitLedger, assign
from dbt_harvest.corpora.report import build_report, markdown
from dbt_harvest.harvester.mint.pipeline import reports_dir


def _report(pin_id: str, n: int, family: str, stage: str, kept: bool, reason: str = "", **more) -> None:
    folder = reports_dir(pin_id)
    folder.mkdir(parents=True, exist_ok=True)
    row = {
        "pin": pin_id,
        "operator": f"{family}.op",
        "family": family,
        "stage": stage,
        "kept": kept,
        "reason": reason,
        "model": f"model.x.m{n}",
        **more,
    }
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
    assert report.families["grain"] == {
        "candidates": 2,
        "kept": 0,
        "screened_out": {"equivalent": 1},
        "confirm_rejected": {"mutant_passes": 1},
        "left_at_cap": 0,
        "repos": 0,
    }
    text = markdown(report)
    assert "| acme/shop | train | MIT | 4 | 1 |" in text and "25%" in text and "(budget)" in text
    assert "Kept tasks: 2 of 5 candidates (train 1, dev 0, test 1); 2 of 2 repositories contribute" in text
    # the yield per data origin and dialect (issue 60): both pins build the repository's own data, as written
    assert (shop.origin, shop.dialect) == ("repository", "native")
    assert "| repository | native | 2 | 5 | 2 | 40% |" in text
    # the strength of the kept tasks' local checks, per split: one train task covered by 2 tests, one test task by none
    assert (shop.local_tests, rows["other/ledger"].local_tests) == ({"2-4": 1}, {"0": 1})
    assert "| covering dbt tests (`local_tests`) | train | test |" in text
    assert "| 0 | 0 | 1 |" in text and "| 2-4 | 1 | 0 |" in text and "| 5+ | 0 | 0 |" in text

    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["corpus", "report", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["per_split"] == {"train": 1, "dev": 0, "test": 1}
    assert (out / "corpus_report.png").read_bytes()[:4] == b"\x89PNG" and "acme/shop" in (
        out / "corpus_report.md"
    ).read_text()


def test_a_grown_corpus_carries_the_rows_of_pins_another_home_minted(world, make, tmp_path, monkeypatch):
    """The previous report's pins keep their rows and family totals; the new pin, minted in a fresh home,
    adds its own; a pin minted again here, or reserved elsewhere since, cannot be carried."""
    old = make("acme/shop")
    assign(world.pins, Params(0, 0, 0))
    _report(old.id, 1, "join", "confirm", True, task_id="t1", silent=True, informative=True, local_tests=1)
    _report(old.id, 2, "grain", "screen", False, "equivalent")
    first = tmp_path / "first"
    assert CliRunner().invoke(main, ["corpus", "report", "--out", str(first)]).exit_code == 0

    fresh = tmp_path / "fresh-home"
    fresh.mkdir()
    monkeypatch.setenv("HARVEST_HOME", str(fresh))
    new = make("newco/ledger")
    assert assign(world.pins, None).action == "extend"
    _report(new.id, 1, "grain", "confirm", True, task_id="t2", silent=True, informative=True, local_tests=0)
    _report(new.id, 2, "join", "screen", False, "no_wrong_repair")
    out = tmp_path / "grown"
    result = CliRunner().invoke(
        main, ["corpus", "report", "--out", str(out), "--carry", str(first / "corpus_report.json"), "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = {r["repo"]: r for r in data["rows"]}
    assert rows["acme/shop"]["kept_per_family"] == {"join": 1} and rows["newco/ledger"]["kept_per_family"] == {
        "grain": 1
    }
    assert data["per_split"]["train"] == 2
    assert data["families"]["join"]["candidates"] == 2 and data["families"]["join"]["kept"] == 1
    assert data["families"]["grain"]["screened_out"] == {"equivalent": 1} and data["families"]["grain"]["kept"] == 1
    # without --carry, this home alone knows nothing of acme/shop
    alone = json.loads(CliRunner().invoke(main, ["corpus", "report", "--out", str(tmp_path / "a"), "--json"]).stdout)
    assert {r["repo"]: r["kept"] for r in alone["rows"]}["acme/shop"] == 0
    # the old pin minted again in this home with the same decisions (a faithful re-mint): its previous
    # row is carried, and its counts are not added to the family totals twice
    _report(old.id, 1, "join", "confirm", True, task_id="t1", silent=True, informative=True, local_tests=1)
    _report(old.id, 2, "grain", "screen", False, "equivalent")
    same = CliRunner().invoke(
        main, ["corpus", "report", "--out", str(tmp_path / "c"), "--carry", str(first / "corpus_report.json"), "--json"]
    )
    assert same.exit_code == 0, same.output
    assert json.loads(same.stdout)["families"] == data["families"]
    # minted again with other decisions: the totals cannot be split, so it is refused
    _report(old.id, 1, "join", "screen", False, "equivalent")
    again = CliRunner().invoke(
        main, ["corpus", "report", "--out", str(tmp_path / "b"), "--carry", str(first / "corpus_report.json")]
    )
    assert again.exit_code == 1 and "minted again in this home" in again.output


def test_a_carried_row_moves_with_the_redraw_and_only_with_it(world, make, tmp_path, monkeypatch):
    """A row carried from a previous report keeps its counts; when the ledger's redraw moved its repository
    it is counted in its new split, and any other disagreement with the ledger is refused."""
    old = make("acme/shop")
    make("other/shop")
    assign(world.pins, Params(0, 0, 0))
    _report(old.id, 1, "join", "confirm", True, task_id="t1", silent=True, informative=True, local_tests=1)
    first = tmp_path / "first"
    assert CliRunner().invoke(main, ["corpus", "report", "--out", str(first)]).exit_code == 0
    monkeypatch.setenv("HARVEST_HOME", str(tmp_path / "fresh-home"))
    (tmp_path / "fresh-home").mkdir()
    carried = [
        "corpus",
        "report",
        "--out",
        str(tmp_path / "out"),
        "--carry",
        str(first / "corpus_report.json"),
        "--json",
    ]
    edited = json.loads((first / "corpus_report.json").read_text())
    edited["rows"][0]["split"] = "test"  # a report that disagrees with the ledger without a redraw
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    refused = CliRunner().invoke(main, [*carried[:-3], "--carry", str(tmp_path / "edited.json")])
    assert refused.exit_code == 1 and "the ledger in train" in refused.output
    assign(world.pins, Params(0, 0, 0, dev_groups=(old.id,)), force=True)
    result = CliRunner().invoke(main, carried)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = {r["repo"]: r for r in data["rows"]}
    assert (rows["acme/shop"]["split"], rows["acme/shop"]["kept"]) == ("dev", 1)
    assert data["per_split"].get("dev") == 1 and data["per_split"].get("train", 0) == 0
    assert rows["other/shop"]["split"] == "train"


def test_an_augmented_pin_has_a_row_of_its_own_under_its_repository(world, make):
    """An augmented pin's recovered tasks are counted in a row marked as such; the repository is still
    one repository when the report counts the ones that contribute."""
    from dataclasses import replace

    base = make("acme/shop")
    assign(world.pins, Params(0, 0, 0))
    augmented = replace(
        base,
        id=f"{base.id}+aug-{'1' * 12}",
        augmentation_sha256="1" * 64,
        augments=base.id,
        recovers=(("model.x.m9", "k9"),),
    )
    _report(base.id, 1, "join", "confirm", True, task_id="t1", silent=True, informative=True, local_tests=1)
    _report(augmented.id, 9, "null", "confirm", True, task_id="t9", silent=True, informative=True, local_tests=1)
    report = build_report([base, augmented], SplitLedger.load(world.pins))
    assert [(r.label, r.kept_per_family) for r in report.rows] == [
        ("acme/shop", {"join": 1}),
        ("acme/shop (augmented)", {"null": 1}),
    ]
    text = markdown(report)
    assert "| acme/shop (augmented) | train |" in text
    assert "Kept tasks: 2 of 2 candidates (train 2, dev 0, test 0); 1 of 1 repositories contribute" in text


def test_the_yield_is_counted_per_data_origin_and_dialect(world, make):
    """Synthesized and ported pins get rows of their own, a repository counted once per pair."""
    from dataclasses import replace

    from dbt_harvest.corpora.report import CorpusReport, origin_lines

    a = make("acme/shop")
    assign(world.pins, Params(0, 0, 0))
    _report(a.id, 1, "join", "confirm", True, task_id="t1", silent=True, informative=True, local_tests=1)
    _report(a.id, 2, "grain", "screen", False, "equivalent")
    (row,) = build_report([a], SplitLedger.load(world.pins)).rows
    rows = (
        row,
        replace(row, repo="b/x", origin="synthesized", dialect="ported:snowflake", candidates=10, kept=3),
        replace(row, repo="c/y", origin="synthesized", dialect="ported:snowflake", candidates=10, kept=1),
        replace(row, repo="d/z", origin="synthesized", dialect="native", candidates=0, kept=0),
    )
    lines = origin_lines(CorpusReport(rows))
    assert "| repository | native | 1 | 2 | 1 | 50% |" in lines
    assert "| synthesized | ported:snowflake | 2 | 20 | 4 | 20% |" in lines
    assert "| synthesized | native | 1 | 0 | 0 | - |" in lines
