"""The sandbox's parts without a full build: the bwrap command, the environment, inputs the runner refuses,
the untrusted results file, the clock, the fingerprint, the no-bubblewrap refusal and the unsandboxed mode.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from sandbox_support import CLOCK, PROJECTS, make_workspace

from dbt_harvest.core.clock import ClockError, clock_env, parse_clock
from dbt_harvest.core.errors import SandboxError
from dbt_harvest.harvester.sandbox import (
    CaptureStep,
    DbtStep,
    Limits,
    QueryStep,
    command,
    fingerprint_sql,
    run_steps,
    sandbox_available,
    write_profile,
)
from dbt_harvest.harvester.sandbox.profile import PROFILE_DIR
from dbt_harvest.harvester.sandbox.results import ResultShapeError, parse_steps, read_result_file
from dbt_harvest.harvester.sandbox.steps import step_request

REPO_ROOT = Path(__file__).resolve().parents[3]


def sandbox_argv(workspace: Path) -> list[str]:
    env = command.child_env(
        command.ChildPaths(command.SANDBOX_WORKSPACE, command.SANDBOX_CODE, command.SANDBOX_HOME, "/tmp"),
        clock_env(CLOCK),
    )
    py = command.python_args(command.SANDBOX_CODE, "{}")
    return command.bwrap_argv(workspace, workspace / PROFILE_DIR, 1 << 26, py, env)


def test_bwrap_command_passes_only_allow_listed_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_should_not_pass")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nope")
    argv = sandbox_argv(tmp_path)
    assert "--clearenv" in argv and "--unshare-all" in argv and "--die-with-parent" in argv
    names = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--setenv"]
    assert set(names) <= command.ALLOWED_ENV
    assert {"PYTHONHASHSEED", "DBT_SEND_ANONYMOUS_USAGE_STATS", "FAKETIME", "LD_PRELOAD", "HOME"} <= set(names)
    assert "hf_should_not_pass" not in " ".join(argv)
    assert argv[argv.index("PYTHONHASHSEED") + 1] == "0"
    assert argv[argv.index("HOME") + 1] == "/tmp/home"


def test_bwrap_command_binds_no_home_repository_or_harvest_home(tmp_path: Path) -> None:
    argv = sandbox_argv(tmp_path)
    sources = [argv[i + 1] for i, arg in enumerate(argv) if arg in ("--bind", "--ro-bind", "--ro-bind-try")]
    writable = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--bind"]
    assert writable == [str(tmp_path)]
    home = Path.home().resolve()
    for source in sources:
        path = Path(source).resolve()
        assert path != home and path not in home.parents
        assert path != REPO_ROOT and path not in REPO_ROOT.parents
        assert path != Path("/")
    # our child code and the one locked-down DuckDB module are all that comes from the repository, read-only
    from_repo = [s for s in sources if Path(s).resolve().is_relative_to(REPO_ROOT)]
    assert from_repo == [str(command.INSIDE_DIR), str(command.LOCKED_DUCKDB)]
    assert argv[argv.index(str(command.INSIDE_DIR)) + 1] == "/opt/harvest"
    assert argv[argv.index(str(command.LOCKED_DUCKDB)) + 1] == "/opt/harvest-lib/locked_duckdb.py"


def test_workspace_that_contains_the_repository_is_refused() -> None:
    with pytest.raises(SandboxError, match="refusing to use"):
        sandbox_argv(REPO_ROOT)


def test_steps_are_validated_before_anything_runs() -> None:
    with pytest.raises(SandboxError, match="may not set --profiles-dir"):
        step_request(DbtStep(("build", "--profiles-dir", "/root")))
    with pytest.raises(SandboxError, match="relative path inside the workspace"):
        step_request(CaptureStep(out="../gold.duckdb"))
    with pytest.raises(SandboxError, match="relative path inside the workspace"):
        step_request(QueryStep(db="/etc/passwd", sql="select 1"))
    with pytest.raises(SandboxError, match="non-empty"):
        step_request(DbtStep(()))
    with pytest.raises(SandboxError, match="out of range"):
        Limits(wall_s=0)


def test_write_profile_replaces_a_planted_symlink(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace).mkdir()
    (workspace / "dbt_project.yml").write_text("name: x\n")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (workspace / PROFILE_DIR).symlink_to(target)
    path = write_profile(workspace, ".", "x_profile")
    assert not (workspace / PROFILE_DIR).is_symlink()
    assert list(target.iterdir()) == []
    profile = json.loads(path.read_text())  # JSON is YAML
    output = profile["x_profile"]["outputs"]["harvest"]
    assert output["threads"] == 1 and output["plugins"] == [{"module": "harvest_lockdown"}]
    assert output["path"] == "{{ env_var('HARVEST_WORKSPACE') }}/build.duckdb"
    with pytest.raises(SandboxError, match="plain identifier"):
        write_profile(workspace, ".", "x; rm -rf /")


def test_results_file_is_treated_as_untrusted(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with pytest.raises(ResultShapeError, match="wrote no results"):
        read_result_file(workspace, "missing.json")
    secret = tmp_path / "secret.txt"
    secret.write_text(json.dumps({"version": 1, "steps": []}))
    (workspace / "link.json").symlink_to(secret)
    with pytest.raises(ResultShapeError, match="cannot be opened safely"):
        read_result_file(workspace, "link.json")
    (workspace / "linked_dir").symlink_to(tmp_path)
    with pytest.raises(ResultShapeError, match="cannot be opened safely"):
        read_result_file(workspace, "linked_dir/secret.txt")
    (workspace / "bad.json").write_text(
        json.dumps({"version": 1, "steps": [{"kind": "query", "ok": True, "detail": {}}]})
    )
    with pytest.raises(ResultShapeError, match="unexpected shape"):
        parse_steps(read_result_file(workspace, "bad.json"), ["dbt"])
    forged = {"kind": "capture", "ok": True, "first_error": "", "detail": {"tables": [{"name": "x"}]}}
    with pytest.raises(ResultShapeError):
        parse_steps({"version": 1, "steps": [forged]}, ["capture"])
    too_many = {"version": 1, "steps": [{"kind": "dbt", "ok": True}] * 2}
    with pytest.raises(ResultShapeError, match="more steps"):
        parse_steps(too_many, ["dbt"])
    multi = {"kind": "dbt", "ok": False, "first_error": "line one\nline two", "detail": {"nodes": []}}
    (result,) = parse_steps({"version": 1, "steps": [multi]}, ["dbt"])
    assert result.first_error == "line one line two"


def test_clock_parsing() -> None:
    assert parse_clock("2024-06-30").isoformat() == "2024-06-30T00:00:00"
    env = clock_env("2024-06-30 08:15:00")
    assert env["FAKETIME"] == "2024-06-30 08:15:00"  # frozen: no "@" (that would tick)
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"
    assert Path(env["LD_PRELOAD"]).is_file()
    with pytest.raises(ClockError, match="not a date"):
        parse_clock("last tuesday")


def test_fingerprint_ignores_row_order_but_sees_duplicates_names_and_types() -> None:
    conn = duckdb.connect()
    conn.execute("create table a as select * from (values (1, 'x'), (2, 'y'), (2, 'y')) t(id, v)")
    conn.execute("create table b as select * from a order by id desc")
    conn.execute("create table dedup as select distinct * from a")
    conn.execute("create table renamed as select id, v as w from a")
    conn.execute("create table retyped as select id::bigint as id, v from a")
    conn.execute("create table empty_a as select * from a where false")

    def fp(name: str) -> str:
        return conn.execute(fingerprint_sql(name)).fetchone()[0]

    assert fp("a") == fp("b")
    assert len({fp("a"), fp("dedup"), fp("renamed"), fp("retyped"), fp("empty_a")}) == 5


def test_missing_bubblewrap_refuses_with_install_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = make_workspace(tmp_path, PROJECTS / "shop", "sandbox_shop")
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))
    ok, why = sandbox_available()
    assert not ok and "apt-get install bubblewrap" in why
    with pytest.raises(SandboxError, match="apt-get install bubblewrap.*sandboxed=False"):
        run_steps(workspace, ".", [DbtStep(("build",))], clock=CLOCK)
    assert not (workspace / ".harvest_logs").exists() and not (workspace / "target").exists()


def test_unsandboxed_mode_keeps_allow_list_clock_and_lockdown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_parent_secret")
    workspace = make_workspace(tmp_path, PROJECTS / "shop", "sandbox_shop")
    run = run_steps(
        workspace,
        ".",
        [
            DbtStep(("run", "--select", "env_probe", "clock_probe")),
            QueryStep("build.duckdb", "select hf_token, jinja_today from main.env_probe"),
            QueryStep("build.duckdb", "select today from main.clock_probe"),
            QueryStep("build.duckdb", "select * from read_text('/etc/hostname')"),
        ],
        clock=CLOCK,
        sandboxed=False,
        stop_on_failure=False,
    )
    assert [step.ok for step in run.steps] == [True, True, True, False]
    assert run.steps[1].detail["rows"] == [["absent", "2024-06-30"]]
    assert run.steps[2].detail["rows"] == [["2024-06-30"]]
    assert "file system operations are disabled" in run.steps[3].first_error


def test_gold_check_refuses_views_macros_and_unreported_tables(tmp_path: Path) -> None:
    from dbt_harvest.harvester.sandbox.gold_check import gold_problem

    path = tmp_path / "gold.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("create table orders as select 1 as id")
    conn.close()
    assert gold_problem(path, ["main.orders"]) == ""
    assert "exactly the captured tables" in gold_problem(path, ["main.orders", "main.extra"])
    conn = duckdb.connect(str(path))
    conn.execute("create view sneaky as select * from read_text('/etc/hostname')")
    conn.close()
    assert "1 views" in gold_problem(path, ["main.orders"])


def test_harvest_home_is_never_a_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "harvest_home"
    home.mkdir()
    monkeypatch.setenv("HARVEST_HOME", str(home))
    (home / "dbt_project.yml").write_text("name: x\n")
    write_profile(home, ".", "x_profile")
    with pytest.raises(SandboxError, match="refusing to use"):
        run_steps(home, ".", [DbtStep(("build",))], clock=CLOCK, sandboxed=False)
    with pytest.raises(SandboxError, match="refusing to use"):
        run_steps(tmp_path, "harvest_home", [DbtStep(("build",))], clock=CLOCK, sandboxed=False)
