"""The agent's tools as plain functions of a workspace: what each does and what it answers.

Every tool returns the observation text the agent reads; a refused call raises InvalidAction with a
message that says what to do instead. ``query`` and ``dbt`` run inside the sandbox (bubblewrap plus a
locked-down DuckDB confined to the workspace), so neither an agent's SQL nor an agent-edited model
can read a file outside the workspace. ``TOOL_PARAMS`` declares each tool's arguments for validation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_harvest.eval.env import policy as files
from dbt_harvest.eval.env.errors import InvalidAction
from dbt_harvest.eval.env.workspace import TaskWorkspace
from dbt_harvest.harvester.sandbox import Limits, safe_fs

DBT_COMMANDS = ("build", "run", "test", "compile", "seed")
#: One node-selection token: names, paths, tags, graph operators; never a flag.
_SELECTOR = re.compile(r"^[A-Za-z0-9_.:/*+@,\-]+$")
MAX_SELECT_TOKENS = 20
LOG_NAME = ".harvest_logs/agent.log"
#: What DuckDB may touch in every agent build and query: the database, its spill folder and the CSV files
#: that already exist (no folder: SQL cannot create a file, e.g. a Python model through COPY … TO).
DUCKDB_SCOPE = "database"

#: tool name -> {argument: (type, required)}
TOOL_PARAMS: dict[str, dict[str, tuple[type, bool]]] = {
    "list_files": {"path": (str, False)},
    "read_file": {"path": (str, True)},
    "write_file": {"path": (str, True), "content": (str, True)},
    "query": {"sql": (str, True)},
    "dbt": {"command": (str, True), "select": (str, False)},
    "validate": {},
    "submit": {},
}
TOOL_NAMES = tuple(TOOL_PARAMS)


@dataclass(frozen=True)
class RunSettings:
    """How tool builds run: sandboxed (always, outside tests of the policy itself), bounds, row caps."""

    sandboxed: bool = True
    limits: Limits = field(default_factory=lambda: Limits(wall_s=300.0))
    query_rows: int = 50
    #: validate/submit by grading the agent's edits through harvester.grading.grade (the fast path where the
    #: edits allow it, a fresh sandboxed build otherwise; eval/env/graded_edits.py); False: build the
    #: agent's workspace itself (the reference the benchmark compares with)
    graded_edits: bool = True


def check_args(tool: str, args: Any) -> dict[str, Any]:
    """Validate a call's arguments against TOOL_PARAMS; InvalidAction names the problem."""
    if tool not in TOOL_PARAMS:
        raise InvalidAction(f"unknown tool {tool!r}; the tools are {', '.join(TOOL_NAMES)}")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise InvalidAction(f"{tool}: arguments must be a JSON object, got {type(args).__name__}")
    spec = TOOL_PARAMS[tool]
    unknown = sorted(set(args) - set(spec))
    if unknown:
        allowed = ", ".join(spec) or "no arguments"
        raise InvalidAction(f"{tool}: unknown argument(s) {', '.join(unknown)}; it takes {allowed}")
    for name, (kind, required) in spec.items():
        if name not in args:
            if required:
                raise InvalidAction(f"{tool}: missing required argument {name!r}")
            continue
        if not isinstance(args[name], kind):
            raise InvalidAction(f"{tool}: argument {name!r} must be a {kind.__name__}")
    return dict(args)


def list_files(ws: TaskWorkspace, path: str = ".") -> str:
    target, rel = files.resolve_read(ws.policy, path)
    entries = files.list_tree(ws.policy, target, rel)
    if not entries:
        return f"{rel}: empty"
    more = "" if len(entries) <= 400 else "\n… more than 400 entries; list a subfolder"
    return "\n".join(entries[:400]) + more


def read_file(ws: TaskWorkspace, path: str) -> str:
    _, rel = files.resolve_read(ws.policy, path)
    entry = safe_fs.lstat(ws.root, rel)
    if entry is not None and entry.kind == "dir":
        raise InvalidAction(f"{rel} is a folder; call list_files on it")
    return files.read_text(ws.policy, rel)


def write_file(ws: TaskWorkspace, path: str, content: str) -> str:
    target, rel = files.check_write(ws.policy, path)
    existed = safe_fs.lstat(ws.root, rel) is not None
    files.write_text(ws.policy, target, rel, content)
    return f"{'updated' if existed else 'created'} {rel} ({len(content)} characters)"


def _profile(ws: TaskWorkspace) -> None:
    from dbt_harvest.harvester.sandbox import write_profile

    write_profile(
        ws.root,
        ws.project_dir,
        ws.profile,
        ws.schema,
        db_file=ws.db_file,
        exclude_tests=ws.exclude_tests,
        toolchain=ws.toolchain,
    )


def _selection(select: str) -> tuple[str, ...]:
    tokens = tuple(select.split())
    if len(tokens) > MAX_SELECT_TOKENS:
        raise InvalidAction(f"select holds {len(tokens)} tokens; at most {MAX_SELECT_TOKENS}")
    for token in tokens:
        if token.startswith("-") or not _SELECTOR.match(token):
            raise InvalidAction(
                f"select token {token!r} is not a node selector; use model names, paths, tag:x, +model+ (no flags)"
            )
    return tokens


def dbt(ws: TaskWorkspace, settings: RunSettings, command: str, select: str = "") -> str:
    from dbt_harvest.harvester.sandbox import DbtStep, run_steps

    if command not in DBT_COMMANDS:
        raise InvalidAction(f"dbt command {command!r} is not allowed; use one of {', '.join(DBT_COMMANDS)}")
    tokens = _selection(select)
    _profile(ws)
    args = (command, *(("--select", *tokens) if tokens else ()))
    run = run_steps(
        ws.root,
        ws.project_dir,
        [DbtStep(args)],
        clock=ws.clock,
        sandboxed=settings.sandboxed,
        limits=settings.limits,
        log_path=ws.root / LOG_NAME,
        duckdb_scope=DUCKDB_SCOPE,
    )
    lines = [f"dbt {' '.join(args)}: {'OK' if run.ok else 'FAILED'}"]
    nodes = run.steps[0].detail.get("nodes", []) if run.steps else []
    for node in nodes[:80]:
        message = (
            f" — {node['message']}" if node.get("message") and node.get("status") not in ("success", "pass") else ""
        )
        lines.append(f"  {node.get('status', '?'):8} {node.get('unique_id', '?')}{message}")
    if len(nodes) > 80:
        lines.append(f"  … and {len(nodes) - 80} more nodes")
    if not run.ok and run.first_error:
        lines.append(f"first error: {run.first_error}")
    if command == "compile" and run.ok:
        compiled = "target/compiled" if ws.project_dir in ("", ".") else f"{ws.project_dir}/target/compiled"
        lines.append(f"compiled SQL is under {compiled}/ (read it with read_file)")
    return "\n".join(lines)


def query(ws: TaskWorkspace, settings: RunSettings, sql: str) -> str:
    from dbt_harvest.harvester.sandbox import QueryStep, run_steps

    if not sql.strip():
        raise InvalidAction("query: sql is empty")
    if not safe_fs.is_file(ws.root, ws.db_file):
        raise InvalidAction("there is no built database yet; run the dbt tool with command 'build' first")
    _profile(ws)
    run = run_steps(
        ws.root,
        ws.project_dir,
        [QueryStep(ws.db_file, sql, settings.query_rows)],
        clock=ws.clock,
        sandboxed=settings.sandboxed,
        limits=settings.limits,
        log_path=ws.root / LOG_NAME,
        duckdb_scope=DUCKDB_SCOPE,
    )
    step = run.steps[0] if run.steps else None
    if step is None or not step.ok:
        return f"query error: {(step.first_error if step else '') or run.first_error or 'the query did not run'}"
    return render_rows(step.detail.get("columns", []), step.detail.get("rows", []), bool(step.detail.get("truncated")))


def render_rows(columns: list[Any], rows: list[list[Any]], truncated: bool) -> str:
    """A plain tab-separated table: a header line, one line per row, a note when rows were cut."""
    header = "\t".join(str(c[0]) if isinstance(c, (list, tuple)) else str(c) for c in columns)
    body = ["\t".join("NULL" if v is None else str(v) for v in row) for row in rows]
    note = [f"(first {len(rows)} rows shown; more rows exist)"] if truncated else [f"({len(rows)} rows)"]
    return "\n".join([header, *body, *note])


def validate(ws: TaskWorkspace, settings: RunSettings) -> str:
    """The task's local checks: a full seed + build with dbt tests; says pass or fail and why."""
    from dbt_harvest.harvester.build import build_workspace

    result = build_workspace(
        ws.root,
        ws.project_dir,
        ws.profile,
        ws.schema,
        ws.clock,
        sandboxed=settings.sandboxed,
        limits=settings.limits,
        log_path=ws.root / LOG_NAME,
        capture=False,
        db_file=ws.db_file,
        duckdb_scope=DUCKDB_SCOPE,
        exclude_tests=ws.exclude_tests,
        toolchain=ws.toolchain,
    )
    return validate_answer(
        result.models_ok, result.first_error, result.tests_total, result.failed_tests, known=ws.exclude_tests
    )


def validate_answer(
    built: bool, first_error: str, tests_total: int, failed_tests: tuple[str, ...], known: tuple[str, ...] = ()
) -> str:
    """What ``validate`` says, whichever path built the project (a dbt build or the fast checks). ``known``:
    selectors of the tests that already failed on the original project (not run, not counted: said last)."""
    if not built:
        answer = f"local checks FAIL: the build fails: {first_error}"
    elif failed_tests:
        failed = ", ".join(sorted(failed_tests)[:20])
        answer = f"local checks FAIL: {len(failed_tests)} of {tests_total} dbt tests fail: {failed}"
    else:
        answer = f"local checks PASS: the project builds and all {tests_total} dbt tests pass"
    if known:
        names = ", ".join(k.split(",", 1)[-1] for k in known[:20])
        answer += (
            f" ({len(known)} pre-existing failing dbt test{'s' if len(known) != 1 else ''} of the original "
            f"project not run: {names})"
        )
    return answer


def project_brief(ws: TaskWorkspace) -> str:
    """What the agent is told about its workspace at the start of an episode."""
    where = "the workspace root" if ws.project_dir in ("", ".") else f"{ws.project_dir}/"
    return (
        f"The dbt project is at {where}; paths are relative to the workspace root. "
        f"You may write files only under {ws.policy.describe()}. "
        "Tools: list_files, read_file, write_file, query (read-only SQL on the built DuckDB), "
        "dbt (build/run/test/compile/seed with a node selection), validate (build + dbt tests), "
        "submit (ends the episode; your project is built once more and checked)."
    )


def workspace_path(ws: TaskWorkspace, rel: str) -> Path:
    """The absolute path of a workspace-relative path (for the grader and tests, not the agent)."""
    return ws.root / rel
