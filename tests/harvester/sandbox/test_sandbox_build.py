"""Real sandboxed dbt-duckdb builds of the shop fixture: capture, stable fingerprints, clock, environment.

Two builds in fresh workspaces, both inside bubblewrap, share one module fixture (each build costs a
few seconds of dbt). Build A seeds, builds, captures gold and queries it; build B does the same with a
deliberately failing dbt test in between, so that "only tests failed" can be told from "models errored".
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest
from sandbox_support import CLOCK, PROJECTS, make_workspace

from dbt_harvest.harvester.sandbox import (
    CaptureStep,
    DbtStep,
    QueryStep,
    SandboxRun,
    fingerprint_sql,
    run_steps,
    write_profile,
)
from dbt_harvest.harvester.sandbox.command import ALLOWED_ENV

PARENT_SECRETS = {"HF_TOKEN": "hf_parent_token_should_not_leak", "HARVEST_CANARY_SECRET": "canary-parent-only"}
PROBE_SQL = "select * from main.env_probe cross join main.clock_probe"
EXPECTED_TABLES = {"main.clock_probe", "main.customer_revenue", "main.env_probe", "main.stg_orders"}


@pytest.fixture(scope="module")
def shop_builds(bwrap: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[SandboxRun, Path]]:
    saved = {key: os.environ.get(key) for key in PARENT_SECRETS}
    os.environ.update(PARENT_SECRETS)
    try:
        ws_a = make_workspace(tmp_path_factory.mktemp("shop_a"), PROJECTS / "shop", "sandbox_shop")
        run_a = run_steps(
            ws_a,
            ".",
            [DbtStep(("seed",)), DbtStep(("build",)), CaptureStep(), QueryStep("gold.duckdb", PROBE_SQL)],
            clock=CLOCK,
        )
        ws_b = make_workspace(tmp_path_factory.mktemp("shop_b"), PROJECTS / "shop", "sandbox_shop")
        run_b = run_steps(
            ws_b,
            ".",
            [
                DbtStep(("seed",)),
                DbtStep(("build",)),
                DbtStep(("test", "--vars", "{amount_cap: 10}")),
                CaptureStep(),
            ],
            clock=CLOCK,
            stop_on_failure=False,
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return {"a": (run_a, ws_a), "b": (run_b, ws_b)}


def test_build_succeeds_and_reports_every_node(shop_builds: dict[str, tuple[SandboxRun, Path]]) -> None:
    run, _ = shop_builds["a"]
    assert run.ok, run.first_error
    assert [step.kind for step in run.steps] == ["dbt", "dbt", "capture", "query"]
    assert not run.timed_out and run.killed_reason == "" and run.returncode == 0
    build_nodes = run.steps[1].detail["nodes"]
    statuses = {node["unique_id"]: node["status"] for node in build_nodes}
    assert statuses["model.sandbox_shop.customer_revenue"] == "success"
    assert statuses["seed.sandbox_shop.shop_orders"] == "success"
    assert statuses["test.sandbox_shop.amount_cap"] == "pass"
    assert run.peak_rss_bytes > 50 << 20


def test_capture_copies_every_model_relation_as_a_table(shop_builds: dict[str, tuple[SandboxRun, Path]]) -> None:
    run, workspace = shop_builds["a"]
    capture = run.steps[2]
    tables = {table["name"]: table for table in capture.detail["tables"]}
    assert set(tables) == EXPECTED_TABLES  # the ephemeral int_shipped is not a relation
    assert capture.detail["seed_rows"] == 10
    revenue = tables["main.customer_revenue"]
    assert revenue["unique_id"] == "model.sandbox_shop.customer_revenue"
    assert revenue["rows"] == 4
    assert [name for name, _ in revenue["columns"]] == [
        "customer_id",
        "full_name",
        "is_member",
        "shipped_orders",
        "shipped_amount",
    ]
    assert tables["main.stg_orders"]["rows"] == 5  # a view in the build, a table in gold

    gold = duckdb.connect(str(workspace / "gold.duckdb"), read_only=True)
    try:
        assert gold.execute("select count(*) from duckdb_views() where not internal").fetchone()[0] == 0
        kinds = gold.execute("select table_type from information_schema.tables").fetchall()
        assert {kind for (kind,) in kinds} == {"BASE TABLE"}
        for name, table in tables.items():
            schema, alias = name.split(".")
            recomputed = gold.execute(fingerprint_sql(f'"{schema}"."{alias}"')).fetchone()[0]
            assert recomputed == table["fingerprint"], name
        paid = gold.execute("select shipped_amount from main.customer_revenue where customer_id = 1").fetchone()[0]
        assert paid == pytest.approx(65.5)
    finally:
        gold.close()


def test_fingerprints_are_stable_across_two_builds(shop_builds: dict[str, tuple[SandboxRun, Path]]) -> None:
    run_a, _ = shop_builds["a"]
    run_b, _ = shop_builds["b"]
    prints_a = {t["name"]: t["fingerprint"] for t in run_a.steps[2].detail["tables"]}
    prints_b = {t["name"]: t["fingerprint"] for t in run_b.steps[3].detail["tables"]}
    assert prints_a == prints_b
    assert len(set(prints_a.values())) == len(prints_a)


def test_failing_dbt_test_is_told_apart_from_model_errors(shop_builds: dict[str, tuple[SandboxRun, Path]]) -> None:
    run, _ = shop_builds["b"]
    assert not run.ok
    assert run.steps[0].ok and run.steps[1].ok
    failed = run.steps[2]
    assert not failed.ok
    assert failed.first_error.startswith("test.sandbox_shop.amount_cap:")
    assert "\n" not in failed.first_error
    statuses = {node["resource_type"]: set() for node in failed.detail["nodes"]}
    for node in failed.detail["nodes"]:
        statuses[node["resource_type"]].add(node["status"])
    assert statuses["test"] == {"pass", "fail"}
    assert "model" not in statuses
    assert run.steps[3].ok  # the capture still ran (stop_on_failure=False)


def test_clock_is_pinned_for_duckdb_and_python(shop_builds: dict[str, tuple[SandboxRun, Path]]) -> None:
    run, _ = shop_builds["a"]
    query = run.steps[3]
    row = dict(zip([name for name, _ in query.detail["columns"]], query.detail["rows"][0]))
    assert row["today"] == "2024-06-30"  # DuckDB current_date
    assert row["now_date"] == "2024-06-30"  # DuckDB now()
    assert row["jinja_today"] == "2024-06-30"  # Python datetime, through dbt's Jinja


def test_environment_is_allow_listed(shop_builds: dict[str, tuple[SandboxRun, Path]]) -> None:
    run, _ = shop_builds["a"]
    query = run.steps[3]
    row = dict(zip([name for name, _ in query.detail["columns"]], query.detail["rows"][0]))
    assert row["hf_token"] == "absent"
    assert row["canary"] == "absent"
    assert row["home_dir"] == "/tmp/home"
    assert "HF_TOKEN" not in ALLOWED_ENV


def test_logs_stay_in_the_workspace_and_results_file_is_removed(
    shop_builds: dict[str, tuple[SandboxRun, Path]],
) -> None:
    run, workspace = shop_builds["a"]
    assert run.log_path.is_relative_to(workspace)
    log = run.log_path.read_text()
    assert "Running with dbt" in log and "[harvest sandbox]" in log
    assert (workspace / "target" / "manifest.json").is_file()
    # dbt's own file log is off (DBT_LOG_LEVEL_FILE=none): what a build says is in the session log above
    assert not (workspace / "logs" / "dbt.log").exists()
    assert not (workspace / ".harvest_tmp").exists()
    assert not list(workspace.rglob("result-*.json"))


def test_a_view_that_fails_when_read_names_itself_and_the_rest_is_captured(bwrap: None, tmp_path: Path) -> None:
    """dbt creates a view without reading it, so a view whose rows cannot all be computed (a cast of text
    that is not a date to a date; a real project failed so) builds and passes the tests that read part of
    it; the capture reads it in full. The failure must name that model, and the other models are still captured."""
    workspace = tmp_path / "ws"
    (workspace / "seeds").mkdir(parents=True)
    (workspace / "models").mkdir()
    (workspace / "dbt_project.yml").write_text(
        "name: lazy_view\nversion: '1.0'\nconfig-version: 2\nprofile: lazy_view\n", encoding="utf-8"
    )
    (workspace / "seeds" / "raw_visits.csv").write_text(
        "visit_id,visited_on\n1,2024-03-01\n2,soon\n3,2024-03-09\n", encoding="utf-8"
    )
    (workspace / "models" / "visit_days.sql").write_text(
        "{{ config(materialized='view') }}\n"
        "select visit_id, try_cast(visited_on as date) as visited_on from {{ ref('raw_visits') }}\n",
        encoding="utf-8",
    )
    (workspace / "models" / "visit_dates.sql").write_text(
        "{{ config(materialized='view') }}\n"
        "select visit_id, cast(visited_on as date) as visited_on from {{ ref('raw_visits') }}\n",
        encoding="utf-8",
    )
    write_profile(workspace, ".", "lazy_view")
    run = run_steps(
        workspace, ".", [DbtStep(("seed",)), DbtStep(("build",)), CaptureStep()], clock=CLOCK, stop_on_failure=False
    )
    seed, build, capture = run.steps
    assert seed.ok and build.ok, build.first_error
    assert not capture.ok and not run.ok
    assert capture.first_error.startswith(
        "model.lazy_view.visit_dates: relation main.visit_dates cannot be read after the build: Conversion Error"
    )
    assert "\n" not in capture.first_error
    assert [table["name"] for table in capture.detail["tables"]] == ["main.visit_days"]
