"""`harvest mutants`: the human report and the --json contract."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from models import INCREMENTAL

from dbt_harvest.cli import main


def _project(tmp_path: Path) -> Path:
    models = tmp_path / "models"
    models.mkdir()
    (models / "events.sql").write_text(INCREMENTAL)
    (models / "broken.sql").write_text("select a from from {{ ref('t') }} where (\n")
    return models


def test_json_lists_every_file_and_mutation(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["mutants", str(_project(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    reports = {Path(r["file"]).name: r for r in json.loads(result.output)}
    assert set(reports) == {"events.sql", "broken.sql"}
    assert not reports["broken.sql"]["parsed"] and reports["broken.sql"]["reason"]
    events = reports["events.sql"]
    assert events["parsed"] and events["reason"] is None and events["mutations"]
    first = events["mutations"][0]
    assert {"operator", "family", "effect", "start", "end", "replacement", "wrong_repairs"} <= set(first)
    assert INCREMENTAL[: first["start"]] + first["replacement"] + INCREMENTAL[first["end"] :] != INCREMENTAL


def test_families_and_human_output(tmp_path: Path) -> None:
    path = _project(tmp_path) / "events.sql"
    result = CliRunner().invoke(main, ["mutants", str(path), "--families", "grain"])
    assert result.exit_code == 0, result.output
    assert "grain.swap_aggregate (grain, changed_values)" in result.output
    assert "-    max(e.occurred_at) as last_seen_at," in result.output
    assert "null." not in result.output
    bad = CliRunner().invoke(main, ["mutants", str(path), "--families", "nope"])
    assert bad.exit_code == 2 and "unknown families" in bad.output


def test_folder_without_models_fails_cleanly(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["mutants", str(tmp_path)])
    assert result.exit_code == 1 and "no .sql files" in result.output
