"""`harvest export spider2`: the example's minted tasks in Spider 2.0-DBT's layout, imported back as a Spider2
checkout and audited in our environment (`harvest audit --benchmark spider2-dbt`), solved and scored both ways.

The session's minted example is exported through the CLI. The oracle plays each exported task's reference
repair, noop submits the project as exported; each submission is built in the sandbox at the audit's day (as
a Spider2 agent would build it: no pinned clock of the pin's) and its database is kept in a results folder
with a results_metadata.jsonl (`--results-dir`). The audit and `harvest score --spider2` must give N/N and 0/N;
where SPIDER2_DIR points at a local copy of Spider2, the official evaluate.py, run as a script on the same
folders, must print the same and agree per instance. The sealed part, the packages an example lacks and
submit's grading of files (not database state) are checked here too.
"""

from __future__ import annotations

import json
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.core.scorer.spider2 import GRADED, score_folder
from dbt_harvest.eval.export.spider2 import DB_FILE, eval_line, profile_text, task_line
from dbt_harvest.harvester.gold_digest import content_digest
from dbt_harvest.harvester.workspace import template
from tests.conftest import Minted
from tests.core.scorer import spider2_official as official_code

pytestmark = pytest.mark.slow

#: A date years after the example's pinned clock: models that read current_date change there.
CHECK_CLOCK = "2031-06-15"


@dataclass(frozen=True)
class Exported:
    out: Path
    report: dict[str, Any]
    minted: Minted

    def task(self, iid: str) -> Any:
        return next(t for t in self.minted.tasks if t.instance_id == iid)


@pytest.fixture(scope="module")
def exported(minted_example: Minted, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    out = tmp_path_factory.mktemp("spider2-export") / "spider2"
    with minted_example.env():
        result = CliRunner().invoke(
            main,
            ["export", "spider2", "--split", "train", str(out), "--check-clock", CHECK_CLOCK, "--json"],
            env={"HARVEST_PROGRESS_INTERVAL": "0"},
        )
    assert result.exit_code == 0, result.output
    # progress counts the exported tasks on stderr; stdout is the report alone
    assert f"export spider2: {len(minted_example.tasks)} tasks" in result.stderr
    return Exported(out, json.loads(result.stdout), minted_example)


def _seed_names(example: Path) -> set[str]:
    return {p.stem for p in (example / "seeds").glob("*.csv")}


def test_the_export_has_spider2s_layout(exported: Exported) -> None:
    out, report = exported.out, exported.report
    ids = [t["instance_id"] for t in report["exported"]]
    assert ids and len(ids) + len(report["skipped"]) == len(exported.minted.tasks)
    assert sorted(p.name for p in out.iterdir()) == ["evaluation_suite", "examples", "spider2-dbt.jsonl"]
    lines = [json.loads(x) for x in (out / "examples" / "spider2-dbt.jsonl").read_text().splitlines()]
    assert (out / "spider2-dbt.jsonl").read_text() == (out / "examples" / "spider2-dbt.jsonl").read_text()
    assert [x["instance_id"] for x in lines] == ids
    gold_dir = out / "evaluation_suite" / "gold"
    assert sorted(p.name for p in gold_dir.iterdir()) == sorted([*ids, "spider2_eval.jsonl"])
    evals = {
        json.loads(x)["instance_id"]: json.loads(x) for x in (gold_dir / "spider2_eval.jsonl").read_text().splitlines()
    }
    for line in lines:
        iid = line["instance_id"]
        task = exported.task(iid)
        assert line == {"instance_id": iid, "instruction": task.problem_statement, "type": "DBT"}
        params = evals[iid]["evaluation"]["parameters"]
        assert evals[iid]["evaluation"]["func"] == "duckdb_match" and params["gold"] == DB_FILE
        assert params["condition_tabs"] == list(task.grading.condition_tabs)
        assert params["condition_cols"] == [list(c) for c in task.grading.condition_cols]
        assert params["ignore_orders"] == list(task.grading.ignore_orders)
        assert content_digest(gold_dir / iid / DB_FILE) == task.gold_sha256
        example = out / "examples" / iid
        assert not list(example.rglob(".git")) and not list(example.rglob("target"))
        assert (example / "dbt_packages").is_dir() and (example / "dbt_project.yml").is_file()
        profile = yaml.safe_load((example / "profiles.yml").read_text())
        output = next(iter(profile.values()))["outputs"]["dev"]
        assert output["type"] == "duckdb" and output["path"] == f"./{DB_FILE}"
        con = duckdb.connect(str(example / DB_FILE), read_only=True)
        try:
            tables = {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()}
        finally:
            con.close()
        assert tables == _seed_names(example)  # the source data, nothing built, no gold
        assert content_digest(example / DB_FILE) != task.gold_sha256
        with exported.minted.env():
            original = (template(exported.minted.pin) / task.file).read_text()
        assert (example / task.file).read_text() != original  # the broken patch is applied
        mode = (example / "profiles.yml").stat().st_mode
        assert stat.S_IMODE(mode) == 0o644 and stat.S_IMODE(example.stat().st_mode) == 0o755
    with exported.minted.env():
        models = template(exported.minted.pin) / "models"
    dated = {p.stem for p in models.rglob("*.sql") if "current_date" in p.read_text()}
    for skipped in report["skipped"]:  # only tasks graded on tables built from the build date
        assert CHECK_CLOCK in skipped["reason"] and "scores 0 against its gold" in skipped["reason"]
        assert set(exported.task(skipped["instance_id"]).grading.condition_tabs) & dated, skipped


def test_pure_lines_mirror_the_task(exported: Exported) -> None:
    task = exported.minted.tasks[0]
    assert eval_line(task)["evaluation"]["parameters"]["gold"] == DB_FILE
    assert task_line(task)["type"] == "DBT"
    assert yaml.safe_load(profile_text("p", "main")) == {
        "p": {
            "target": "dev",
            "outputs": {"dev": {"type": "duckdb", "path": "./build.duckdb", "schema": "main", "threads": 1}},
        }
    }


def test_the_test_split_is_never_exported(minted_example: Minted, tmp_path: Path) -> None:
    out = tmp_path / "never"
    with minted_example.env():
        result = CliRunner().invoke(main, ["export", "spider2", "--split", "test", str(out)])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert "sealed" in result.output and "harvest audit --split test" in result.output
    assert not out.exists()


def test_an_existing_output_folder_is_refused(minted_example: Minted, tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine\n")
    with minted_example.env():
        result = CliRunner().invoke(main, ["export", "spider2", "--split", "train", str(tmp_path / "busy")])
    assert result.exit_code == 1 and "already exists" in result.output
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["keep.txt"]


# --- the round trip: export -> `harvest spider2 import` -> `harvest audit --benchmark spider2-dbt` -------------


def _audit(exported: Exported, checkout: Path, run_dir: Path, *args: str) -> Any:
    with exported.minted.env():
        return CliRunner().invoke(
            main,
            [
                "audit",
                "--benchmark",
                "spider2-dbt",
                "--spider2",
                str(checkout),
                "--run-dir",
                str(run_dir),
                "--json",
                *args,
            ],
        )


def test_an_export_imports_as_dev_instances_with_their_reference(exported: Exported) -> None:
    with exported.minted.env():
        result = CliRunner().invoke(main, ["spider2", "import", str(exported.out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    ids = sorted(t["instance_id"] for t in exported.report["exported"])
    assert report["benchmark"] is False and report["instances"] == len(ids)
    assert report["parts"] == {"dev": {"instances": len(ids), "playable": len(ids)}}
    for row in report["rows"]:
        task = exported.task(row["instance_id"])
        assert row["playable"] and row["has_reference"] and row["part"] == "dev", row
        assert row["database"] == DB_FILE and row["graded_tables"] == list(task.grading.condition_tabs)


@pytest.mark.deep(
    covered_by=(
        "tests/export/test_spider2.py::test_submit_grades_the_project_files_not_the_state_the_agents_database_reached",
        "tests/export/test_spider2.py::test_an_export_imports_as_dev_instances_with_their_reference",
        "tests/eval/test_audit.py::test_oracle_scores_n_of_n",
    )
)
def test_the_oracle_scores_n_of_n_and_noop_zero_on_the_exported_instances(exported: Exported, tmp_path: Path) -> None:
    """Both audits keep what they graded in Spider2's results layout: `harvest score --spider2` (and, where
    SPIDER2_DIR names a local copy, the official evaluate.py run as a script) must give the same N/N and
    0/N on those databases, and agree per instance."""
    n = len(exported.report["exported"])
    gold = exported.out / "evaluation_suite" / "gold"
    for driver in ("oracle", "noop"):
        results = tmp_path / f"results-{driver}"
        result = _audit(
            exported,
            exported.out,
            tmp_path / driver,
            "--split",
            "dev",
            "--driver",
            driver,
            "--results-dir",
            str(results),
        )
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["split"] == "spider2-dbt/dev" and report["n"] == n
        assert report["official"] == (n if driver == "oracle" else 0), report
        assert not report["crashed"] and not report["missing"] and report["submitted"] == n
        assert (
            report["benchmark"] == "spider2-dbt"
            and "evaluate.py divides by the submitted" in (tmp_path / driver / "report.md").read_text()
        )
        run = json.loads((tmp_path / driver / "run.json").read_text())
        assert run["benchmark"] == "spider2-dbt" and run["clock"].endswith("00:00:00")
        for entry in exported.report["exported"]:
            verdict = json.loads((tmp_path / driver / "episodes" / f"{entry['instance_id']}.json").read_text())
            assert verdict["status"] == "submitted" and verdict["submission"]["built"], verdict
        scored = score_folder(results, gold)
        assert all(r.status == GRADED for r in scored.instances)
        assert scored.score == report["official"] and scored.official_line == (
            f"1.0 {n} {n}" if driver == "oracle" else f"0.0 0 {n}"
        )
        if official_code.locate()[0] is not None:
            run_official = official_code.run_official(results, gold)
            assert run_official.last_line == scored.official_line
            assert run_official.passed == {r.instance_id for r in scored.instances if r.official == 1}
    with exported.minted.env():
        compared = CliRunner().invoke(
            main, ["audit", "compare", str(tmp_path / "noop"), str(tmp_path / "oracle"), "--json", "--resamples", "200"]
        )
    assert compared.exit_code == 0, compared.output
    comparison = json.loads(compared.stdout)
    assert comparison["difference"] == 1.0, comparison


def _as_benchmark(exported: Exported, dest: Path, names: dict[str, str]) -> Path:
    """A copy of the export whose instances carry benchmark ids (``names``: exported id -> benchmark id)."""
    shutil.copytree(exported.out, dest, symlinks=True)
    for old, new in names.items():
        for folder in (dest / "examples", dest / "evaluation_suite" / "gold"):
            (folder / old).rename(folder / new)
        reference = dest / "evaluation_suite" / "reference"
        (reference / f"{old}.patch").rename(reference / f"{new}.patch")
    for path in (dest / "examples" / "spider2-dbt.jsonl", dest / "evaluation_suite" / "gold" / "spider2_eval.jsonl"):
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        path.write_text(
            "".join(
                json.dumps({**x, "instance_id": names[x["instance_id"]]}) + "\n"
                for x in lines
                if x["instance_id"] in names
            )
        )
    return dest


def test_the_sealed_part_is_audited_once_per_frozen_recipe(exported: Exported, tmp_path: Path) -> None:
    from dbt_harvest.eval.spider2.sealed import LEDGER_NAME
    from dbt_harvest.eval.spider2.split import committed
    from tests.recipes import frozen_run

    sealed_ids = committed().sealed[:2]
    exported_ids = [t["instance_id"] for t in exported.report["exported"]][:2]
    checkout = _as_benchmark(exported, tmp_path / "spider2-dbt", dict(zip(exported_ids, sealed_ids)))
    recipe = frozen_run(tmp_path / "runs", "sealed-spider2")

    refused = _audit(exported, checkout, tmp_path / "no-recipe", "--split", "sealed", "--driver", "oracle")
    assert refused.exit_code == 2 and "--recipe" in refused.output
    incomplete = _audit(
        exported, checkout, tmp_path / "incomplete", "--split", "sealed", "--driver", "oracle", "--recipe", str(recipe)
    )
    assert incomplete.exit_code == 1 and "46 of the 48 sealed instances cannot be played" in incomplete.output
    assert not (exported.minted.pins / LEDGER_NAME).exists()  # a refusal before the start records nothing

    first = _audit(
        exported,
        checkout,
        tmp_path / "first",
        "--split",
        "sealed",
        "--driver",
        "oracle",
        "--recipe",
        str(recipe),
        "--allow-unavailable",
    )
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["n"] == 48 and report["official"] == 2  # k/N over the whole part: the absent ones count 0
    assert len(report["crashed"]) == 46 and set(sealed_ids).isdisjoint(report["crashed"]) and report["submitted"] == 2
    ledger = [json.loads(x) for x in (exported.minted.pins / LEDGER_NAME).read_text().splitlines()]
    assert [e["event"] for e in ledger] == ["start", "result"] and ledger[1]["official"] == 2

    again = _audit(
        exported,
        checkout,
        tmp_path / "again",
        "--split",
        "sealed",
        "--driver",
        "oracle",
        "--recipe",
        str(recipe),
        "--allow-unavailable",
    )
    assert again.exit_code == 1 and "already started its sealed Spider2 audit" in again.output
    resumed = _audit(
        exported,
        checkout,
        tmp_path / "first",
        "--split",
        "sealed",
        "--driver",
        "oracle",
        "--recipe",
        str(recipe),
        "--allow-unavailable",
    )
    assert resumed.exit_code == 1 and "already ended" in resumed.output
    assert len((exported.minted.pins / LEDGER_NAME).read_text().splitlines()) == 2


def test_submit_grades_the_project_files_not_the_state_the_agents_database_reached(
    exported: Exported, tmp_path: Path
) -> None:
    """The true repair is written and built (its graded table queried there), then the file is put back
    broken and submitted: the database built from the repair is not what is graded, the files are."""
    from dbt_harvest.core.patching import apply_to_text, parse_patch
    from dbt_harvest.eval.audit.runner import play_one
    from dbt_harvest.eval.drivers.scripted import ScriptedDriver
    from dbt_harvest.eval.env.environment import EnvSettings
    from dbt_harvest.eval.spider2.checkout import read_checkout
    from dbt_harvest.eval.spider2.tasks import Spider2Tasks

    entry = exported.report["exported"][0]
    instance = read_checkout(exported.out).by_id()[entry["instance_id"]]
    source = Spider2Tasks([instance], {instance.instance_id: "dev"})
    task = source(instance.instance_id)
    (file_patch,) = parse_patch(task.fix_patch)
    broken = (instance.example / file_patch.path).read_text()
    table = task.grading.condition_tabs[0]
    driver = ScriptedDriver(
        [
            ("write_file", {"path": file_patch.path, "content": apply_to_text(broken, file_patch)}),
            ("dbt", {"command": "run"}),
            ("query", {"sql": f"select count(*) as n from {table}"}),
            ("write_file", {"path": file_patch.path, "content": broken}),
            ("submit", {}),
        ]
    )
    with exported.minted.env():
        verdict, transcript = play_one(task, driver, EnvSettings(scratch=tmp_path), source)
    observations = [e["observation"] for e in transcript if e.get("kind") == "action"]
    assert observations[1].startswith("dbt run: OK") and observations[2].startswith("n\n"), observations
    assert verdict["status"] == "submitted" and verdict["official"] == 0 and verdict["submission"]["built"], verdict


def test_an_example_without_its_packages_gets_them_from_the_import(
    exported: Exported, example_harvest: Any, tmp_path: Path
) -> None:
    """Some benchmark examples ship no dbt_packages (its harness runs `dbt deps` online): such an instance
    cannot be played until `harvest spider2 import` resolves its packages (here from the example's package
    mirror, offline); its workspaces then get them vendored, and the oracle solves it."""
    iid = exported.report["exported"][0]["instance_id"]
    checkout = tmp_path / "spider2-dbt"
    shutil.copytree(exported.out, checkout, symlinks=True)
    for path in (
        checkout / "examples" / "spider2-dbt.jsonl",
        checkout / "evaluation_suite" / "gold" / "spider2_eval.jsonl",
    ):
        path.write_text("".join(x + "\n" for x in path.read_text().splitlines() if json.loads(x)["instance_id"] == iid))
    shutil.rmtree(checkout / "examples" / iid / "dbt_packages")

    def imported(*args: str) -> dict[str, Any]:
        with exported.minted.env():
            result = CliRunner().invoke(
                main, ["spider2", "import", str(checkout), "--json", *args], env={"HARVEST_PACKAGE_MIRROR": ""}
            )
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)["rows"]
        return row

    missing = imported()
    assert missing["needs_packages"] and not missing["playable"] and "could not be resolved" in missing["problems"][0]
    refused = _audit(exported, checkout, tmp_path / "refused", "--split", "dev", "--driver", "oracle")
    assert refused.exit_code == 0 and json.loads(refused.stdout)["crashed"] == [iid]
    row = imported("--package-mirror", str(example_harvest.example.mirror))
    assert row["playable"] and row["packages"], row
    result = _audit(exported, checkout, tmp_path / "run", "--split", "dev", "--driver", "oracle")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["official"] == 1
    assert not (checkout / "examples" / iid / "dbt_packages").exists()  # the checkout is only read
