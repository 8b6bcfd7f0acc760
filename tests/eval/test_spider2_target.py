"""Spider 2.0-DBT as an audit target, without the benchmark's data: the committed split, reading a checkout.

The checkouts here are written by the tests (our own tiny projects and DuckDB files in Spider2's layout);
the round trip through real builds (export -> import -> audit) is in tests/export/test_spider2.py. Where
SPIDER2_DIR names a local copy of the benchmark, its real metadata must read whole (68 instances).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.eval.spider2.audit import part_instances
from dbt_harvest.eval.spider2.checkout import Spider2CheckoutError, read_checkout
from dbt_harvest.eval.spider2.split import SplitFileError, committed, draw, parse

# --- the committed split ---------------------------------------------------------------------------------


def test_the_committed_split_is_16_dev_and_48_sealed_of_the_64_scoreable() -> None:
    split = committed()
    assert len(split.dev) == 16 and len(split.sealed) == 48 and len(split.names) == 68
    assert set(split.unscoreable) == {"airbnb002", "biketheft001", "gitcoin001", "google_ads001"}
    assert not set(split.dev) & set(split.sealed)
    assert (split.dev, split.sealed) == draw([*split.dev, *split.sealed], split.seed)
    assert split.part_of(split.sealed[0]) == "sealed" and split.part_of(split.dev[0]) == "dev"
    assert split.part_of("airbnb002") is None and split.part_of("one_of_our_exports") == "dev"


def test_a_hand_edited_split_is_refused() -> None:
    data = committed().to_dict()
    moved = {
        **data,
        "dev": sorted([*data["dev"][1:], data["sealed"][0]]),
        "sealed": sorted([*data["sealed"][1:], data["dev"][0]]),
    }
    with pytest.raises(SplitFileError, match="not the recorded seed's draw"):
        parse(moved)
    with pytest.raises(SplitFileError, match="twice"):
        parse({**data, "sealed": [*data["sealed"], data["dev"][0]]})
    with pytest.raises(SplitFileError, match="not the recorded seed's draw"):
        parse({**data, "seed": data["seed"] + 1})


def test_the_draw_depends_on_the_seed_only() -> None:
    ids = [f"i{n:02d}" for n in range(64)]
    assert draw(ids, 7) == draw(list(reversed(ids)), 7)
    assert draw(ids, 7) != draw(ids, 8)
    with pytest.raises(SplitFileError):
        draw(ids[:3], 7, dev_size=3)


def test_spider2_split_prints_the_committed_split() -> None:
    result = CliRunner().invoke(main, ["spider2", "split", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == committed().to_dict()


# --- reading a checkout ------------------------------------------------------------------------------------


def _database(path: Path, tables: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    try:
        for name, body in tables.items():
            con.execute(f"create table {name} as {body}")
    finally:
        con.close()


def _project(example: Path, project_dir: str, db: str) -> None:
    project = example / project_dir
    project.mkdir(parents=True, exist_ok=True)
    (project / "dbt_project.yml").write_text("name: shop\nversion: '1.0'\nprofile: shop\n")
    (project / "profiles.yml").write_text(
        f"shop:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: ./{db}\n      schema: main\n"
    )
    (project / "models").mkdir(exist_ok=True)
    (project / "models" / "orders.sql").write_text("select 1 as id\n")


def _checkout(root: Path) -> Path:
    """Four instances: one playable (its project in a sub-folder), one without its database, one whose gold
    is shipped under another name, one graded by a check we do not run."""
    folder = root / "spider2-dbt"
    lines, evals = [], []
    params = {"gold": "shop.duckdb", "condition_tabs": ["orders"], "condition_cols": [[0]], "ignore_orders": [True]}
    for iid in ("shop001", "shop002", "shop003", "shop004"):
        example = folder / "examples" / iid
        _project(example, "integration_tests" if iid == "shop001" else ".", "shop.duckdb")
        if iid != "shop002":
            where = example / ("integration_tests" if iid == "shop001" else ".") / "shop.duckdb"
            _database(where, {"raw_orders": "select 1 as id"})
        gold_name = "renamed.duckdb" if iid == "shop003" else "shop.duckdb"
        _database(folder / "evaluation_suite" / "gold" / iid / gold_name, {"orders": "select 1 as id"})
        lines.append({"instance_id": iid, "instruction": f"Build the orders model ({iid}).", "type": "DBT"})
        evaluation = (
            {"func": "table_match", "parameters": params}
            if iid == "shop004"
            else [{"func": "string_match", "parameters": {}}, {"func": "duckdb_match", "parameters": params}]
        )
        evals.append({"instance_id": iid, "evaluation": evaluation})
    (folder / "examples" / "spider2-dbt.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "evaluation_suite" / "gold" / "spider2_eval.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in evals)
    )
    return root


def test_a_checkout_reads_every_instance_with_what_keeps_it_from_being_played(tmp_path: Path) -> None:
    checkout = read_checkout(_checkout(tmp_path))
    by_id = checkout.by_id()
    assert checkout.folder == (tmp_path / "spider2-dbt").resolve() and sorted(by_id) == [
        "shop001",
        "shop002",
        "shop003",
        "shop004",
    ]
    ok = by_id["shop001"]
    assert ok.playable and ok.project_dir == "integration_tests" and ok.database == "integration_tests/shop.duckdb"
    assert ok.profile == "shop" and ok.schema == "main" and ok.instruction == "Build the orders model (shop001)."
    assert ok.grading is not None and ok.grading.condition_tabs == ("orders",) and ok.grading.ignore_orders == (True,)
    assert ok.gold is not None and ok.gold.name == "shop.duckdb" and ok.reference == ""
    assert by_id["shop002"].problems == (
        "no database examples/shop002/shop.duckdb (unpack the benchmark's DuckDB archive: its setup.py)",
    )
    (renamed,) = by_id["shop003"].problems
    assert "no gold database" in renamed and "renamed.duckdb" in renamed and "--gold-alias shop003=FILE" in renamed
    (unmirrored,) = by_id["shop004"].problems
    assert "table_match" in unmirrored and by_id["shop004"].grading is None
    aliased = read_checkout(tmp_path, {"shop003": "renamed.duckdb"}).by_id()["shop003"]
    assert aliased.playable and aliased.gold is not None and aliased.gold.name == "renamed.duckdb"
    (escaping,) = read_checkout(tmp_path, {"shop003": "../shop001/shop.duckdb"}).by_id()["shop003"].problems
    assert "not a plain file name" in escaping


def test_what_is_not_a_checkout_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(Spider2CheckoutError, match="not a Spider 2.0-DBT checkout"):
        read_checkout(tmp_path)
    _checkout(tmp_path)
    with pytest.raises(Spider2CheckoutError, match="not an instance"):
        read_checkout(tmp_path, {"nope001": "x.duckdb"})
    path = tmp_path / "spider2-dbt" / "evaluation_suite" / "gold" / "spider2_eval.jsonl"
    path.write_text(path.read_text() + "{broken\n")
    with pytest.raises(Spider2CheckoutError, match="the official reader stops there"):
        read_checkout(tmp_path)
    result = CliRunner().invoke(main, ["spider2", "import", str(tmp_path)])
    assert result.exit_code == 1 and result.output.count("\n") == 1 and result.output.startswith("error:")


def test_parts_of_the_benchmark_count_absent_instances_and_an_export_is_all_dev(tmp_path: Path) -> None:
    ours = read_checkout(_checkout(tmp_path / "ours"))
    split = committed()
    assert [i.instance_id for i in part_instances(ours, split, "dev")] == ["shop001", "shop002", "shop003", "shop004"]
    assert part_instances(ours, split, "sealed") == []
    benchmark = tmp_path / "bench" / "spider2-dbt"
    (benchmark / "examples").mkdir(parents=True)
    (benchmark / "evaluation_suite" / "gold").mkdir(parents=True)
    sealed_id = split.sealed[0]
    (benchmark / "examples" / "spider2-dbt.jsonl").write_text(
        json.dumps({"instance_id": sealed_id, "instruction": "x"}) + "\n"
    )
    (benchmark / "evaluation_suite" / "gold" / "spider2_eval.jsonl").write_text(
        json.dumps(
            {"instance_id": sealed_id, "evaluation": {"func": "duckdb_match", "parameters": {"gold": "g.duckdb"}}}
        )
        + "\n"
    )
    read = read_checkout(benchmark)
    sealed = part_instances(read, split, "sealed")
    assert [i.instance_id for i in sealed] == sorted(split.sealed) and not any(i.playable for i in sealed)
    absent = [i for i in sealed if i.instance_id != sealed_id]
    assert all(i.problems == ("not in this checkout's metadata",) for i in absent)
    assert len(part_instances(read, split, "dev")) == 16


def test_audit_usage_errors_for_the_benchmark() -> None:
    runner = CliRunner()
    for args, message in (
        (
            ["--benchmark", "spider2-dbt", "--split", "test", "--driver", "noop", "--spider2", "."],
            "dev or --split sealed",
        ),
        (["--split", "sealed", "--driver", "noop"], "spider2-dbt's"),
        (["--benchmark", "spider2-dbt", "--split", "dev", "--driver", "wrong", "--spider2", "."], "no confirmed wrong"),
        (["--benchmark", "spider2-dbt", "--split", "sealed", "--driver", "noop", "--spider2", "."], "--recipe"),
        (["--gold-alias", "a=b", "--driver", "noop"], "only apply with --benchmark spider2-dbt"),
    ):
        result = runner.invoke(main, ["audit", *args])
        assert result.exit_code == 2 and message in result.output, (args, result.output)


@pytest.mark.skipif(
    not os.environ.get("SPIDER2_DIR"), reason="SPIDER2_DIR is not set (a local copy of xlang-ai/Spider2)"
)
def test_the_real_benchmark_metadata_reads_whole() -> None:
    checkout = read_checkout(Path(os.environ["SPIDER2_DIR"]))
    ids = {i.instance_id for i in checkout.instances}
    assert len(ids) == 68 and ids == committed().names
    assert all(
        i.instruction and i.grading is not None and i.project_dir == "." and i.database for i in checkout.instances
    )


def test_a_benchmark_instance_gets_the_neutral_prompt_and_our_tasks_the_repair_prompt(tmp_path: Path) -> None:
    from dbt_harvest.eval.drivers.chat import BENCHMARK_SYSTEM_PROMPT, SYSTEM_PROMPT, system_prompt
    from dbt_harvest.eval.spider2.tasks import instance_task

    instance = read_checkout(_checkout(tmp_path)).by_id()["shop001"]
    task = instance_task(instance, "dev")
    assert task.problem_statement == instance.instruction and task.family == "spider2-dbt" and task.gold_sha256
    assert system_prompt(task) == BENCHMARK_SYSTEM_PROMPT
    from dataclasses import replace

    assert system_prompt(replace(task, broken_patch="--- a/x\n+++ b/x\n")) == SYSTEM_PROMPT


def test_a_database_reached_through_a_link_is_never_used_or_moved(tmp_path: Path) -> None:
    """A checkout whose profile names its database under a folder that is a link out of the example (to a
    host folder): the instance cannot be played, and materializing it leaves the host file where it was."""
    from dbt_harvest.eval.env.errors import EnvError
    from dbt_harvest.eval.spider2.checkout import Spider2Instance
    from dbt_harvest.eval.spider2.tasks import Spider2Tasks

    root = _checkout(tmp_path / "c")
    example = root / "spider2-dbt" / "examples" / "shop002"  # no database of its own
    host = tmp_path / "host"
    _database(host / "shop.duckdb", {"secret": "select 42 as x"})
    (example / "data").symlink_to(host)
    (example / "profiles.yml").write_text(
        (example / "profiles.yml").read_text().replace("./shop.duckdb", "./data/shop.duckdb")
    )
    instance = read_checkout(root).by_id()["shop002"]
    assert instance.database == "data/shop.duckdb" and not instance.playable
    assert "no database" in instance.problems[0]
    forced = Spider2Instance(**{**instance.__dict__, "problems": ()})  # as if the check had been fooled
    source = Spider2Tasks([forced], {"shop002": "dev"})
    with pytest.raises(EnvError, match="reached without a link"):
        source.materialize(source("shop002"), tmp_path / "scratch")
    assert (host / "shop.duckdb").is_file() and not list((tmp_path / "scratch").iterdir())
