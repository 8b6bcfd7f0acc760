"""The sandbox child: runs a list of steps (dbt commands, gold capture, read-only queries) in one process.

It is started by harvester.sandbox.runner, normally inside bubblewrap, with one argument: the request
as JSON (workspace, project, profile, lockdown settings, steps, where to write results). dbt runs
in-process through ``dbtRunner`` so several commands share one warm interpreter. After every step the
child rewrites its results file (atomically) so that a build killed at its time limit still reports the
steps it finished. The parent treats that file as untrusted input.

Stdlib, dbt and duckdb only: this file runs inside the sandbox with only /opt/harvest on its path.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import gc
import importlib.util
import json
import math
import os
import re
import resource
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from harvest_fingerprint import alias_collides, fingerprint_sql, quote_identifier, quote_relation
from harvest_names import captured_names

#: a profile name as ``harvester.sandbox.profile.write_profile`` accepts it (the meta file is re-read here)
_PROFILE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_TEST_SELECTOR = re.compile(r"resource_type:(test|unit_test),[A-Za-z0-9_]+")

harvest_lockdown: Any = None  # imported by main() once locked_duckdb (bound from core/) is loaded

GOLD_ALIAS = "__harvest_gold"
WORKSPACE_ENV = "HARVEST_WORKSPACE"  # the profile's database path reads it (harvester.sandbox.profile)
MAX_MESSAGE = 600
FAILED_NODE_STATUSES = {"error", "fail", "runtime error"}


def one_line(text: object, limit: int = MAX_MESSAGE) -> str:
    """Collapse whitespace to single spaces and cut to ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def summarize_message(text: object) -> str:
    """One line for a node message; for a Python traceback keep its head and its final error line."""
    raw = str(text)
    if "Traceback (most recent call last)" in raw:
        head = raw.split("Traceback (most recent call last)", 1)[0]
        lines = [line.strip() for line in raw.splitlines() if line.strip()]
        return one_line(f"{head} … {lines[-1] if lines else ''}")
    return one_line(raw)


def json_safe(value: Any) -> Any:
    """Turn a DuckDB value into something json.dumps accepts without losing its meaning."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (_dt.date, _dt.datetime, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return str(value)


#: DuckDB's compressed segments are not byte-reproducible (writing the same rows twice gives files that
#: differ in a few bytes), so the gold file, whose sha256 names it in every pin and task, differed on
#: every rebuild. Uncompressed segments are (measured: the same sha256 on every rewrite of the example's
#: and three real repositories' gold; files 0-12% larger).
CAPTURE_SETTINGS = ("SET force_compression = 'uncompressed'",)


class Child:
    """Holds the request and the results written so far."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.workspace = Path(request["workspace"])
        self.project = self.workspace / request["project_dir"]
        self.profiles_dir = Path(request["profiles_dir"])
        self.db_path = self.workspace / request["db_file"]
        self.result_path = self.workspace / request["result_file"]
        self.relation_rows = int(request["relation_rows"])
        self.results: list[dict[str, Any]] = []
        self.runner: Any = None
        lock = request["lockdown"]
        harvest_lockdown.LOCKDOWN = harvest_lockdown.Lockdown(
            workspace=str(self.workspace),
            temp_directory=str(self.workspace / lock["temp_subdir"]),
            memory_limit=str(lock["memory_limit"]),
            threads=int(lock["threads"]),
            max_temp_directory_size=str(lock["max_temp_directory_size"]),
            scope=str(lock.get("scope", "workspace")),
            database=str(self.db_path),
        )

    # results -------------------------------------------------------------------------------------
    def write_results(self, done: bool) -> None:
        payload = {
            "version": 1,
            "done": done,
            "steps": self.results,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }
        tmp = self.result_path.with_name(self.result_path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(payload, handle)
        os.replace(tmp, self.result_path)

    def run(self) -> int:
        if self.request.get("parallel"):
            return self.run_parallel()
        if self.request.get("serve"):
            return self.serve()
        return self.run_batch(self.request["steps"], bool(self.request["stop_on_failure"]))

    def run_parallel(self) -> int:
        """Parallel mode: one batch per workspace, all at once, each in its own fork of this process.

        The child starts before its workspaces are filled: dbt is imported (and its schemas built) once,
        here, before any project code runs, while the parent prepares them. Then one line read from stdin,
        ``{"batches": [{"steps": [...], "result_file": ..., "stop_on_failure": bool, "project_dir": ...,
        "db_file": ...}]}`` (one per workspace of ``parallel``, in order), starts them. Each fork works in
        its own workspace, with its own profile, database file, DuckDB lockdown and results file, exactly
        as a one-shot child of that workspace would; they share nothing this process made after the
        import. The exit code is the first non-zero one of the forks (a fork killed by a signal counts as
        128 + its number).
        """
        warm_up_dbt()
        gc.collect()
        gc.freeze()  # the forks' collections skip what the import made: fewer of its pages copied on write
        line = sys.stdin.readline()
        if not line.strip():
            return 0  # the parent gave up before starting the batches
        batches = json.loads(line)["batches"]
        spaces = self.request["parallel"]
        if len(batches) != len(spaces):
            raise RuntimeError(f"{len(batches)} batches for {len(spaces)} workspaces")
        pids = [
            fork_running(lambda space=space, batch=batch, n=n: self.run_in(space, batch, n))
            for n, (space, batch) in enumerate(zip(spaces, batches), start=1)
        ]
        worst = 0
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            worst = worst or (128 - code if code < 0 else code)
        return worst

    def run_in(self, space: str, batch: dict[str, Any], n: int = 1) -> None:
        """(In a fork of a parallel child) run ``batch`` as a one-shot child of workspace ``space`` would. The
        ``n``-th workspace (n > 1) also gets a home folder of its own (``$HOME-<n>``): with its other root, a
        value of the build that depends on where or as whom it ran differs from the first workspace's."""
        os.environ[WORKSPACE_ENV] = space
        if n > 1:
            home = f"{os.environ.get('HOME', '/tmp/home')}-{n}"
            os.makedirs(home, exist_ok=True)
            os.environ["HOME"] = home
        os.chdir(space)
        child = Child(
            {
                **self.request,
                "workspace": space,
                "profiles_dir": f"{space}/.harvest_profile",
                "project_dir": batch["project_dir"],
                "db_file": batch["db_file"],
                "result_file": batch["result_file"],
            }
        )
        child.run_batch(batch["steps"], bool(batch["stop_on_failure"]))

    def serve(self) -> int:
        """Warm mode: run one batch of steps per line read from stdin until it closes.

        Each line is ``{"steps": [...], "result_file": ..., "stop_on_failure": bool}``; the results go to
        that file as in a one-shot run, then an empty ``<result_file>.done`` tells the parent the batch is
        over. dbt stays imported and its partial-parse state warm between batches.

        With ``isolate`` (asked for only inside bubblewrap) no batch runs in this process: each runs in a
        forked copy of it, made after dbt is imported and before any project code ran, and after the copy
        exits every other process of the sandbox's PID namespace is killed and every file a batch left in
        the sandbox's private /tmp and /dev/shm is removed, before the ``.done`` marker is written. So
        nothing a batch did in memory, in a leftover process or in those folders reaches the next batch
        (the parent resets the workspace itself: ``harvester.grading.warm``).
        """
        isolate = bool(self.request.get("isolate"))
        keep: set[str] = set()
        if isolate:
            if os.getpid() > 8:  # bubblewrap's PID namespace numbers its processes from 1
                raise RuntimeError("isolated batches need the sandbox's own PID namespace (run inside bubblewrap)")
            warm_up_dbt()
            keep = {path for root in SCRUBBED_DIRS for path in tree_paths(root)}
        for line in sys.stdin:
            if not line.strip():
                continue
            batch = json.loads(line)
            self.results = []
            self.result_path = self.workspace / batch["result_file"]
            if isolate:
                self.run_forked(batch, keep)
            else:
                self.run_batch(batch["steps"], bool(batch["stop_on_failure"]))
            marker = self.result_path.with_name(self.result_path.name + ".done")
            with open(marker, "w", encoding="utf-8"):
                pass
        return 0

    def run_forked(self, batch: dict[str, Any], keep: set[str]) -> None:
        """Run one batch in a forked copy of this process, then remove every trace it left outside the
        workspace (see ``serve``)."""
        pid = fork_running(lambda: self.run_batch(batch["steps"], bool(batch["stop_on_failure"])))
        os.waitpid(pid, 0)
        kill_namespace_others()
        for root in SCRUBBED_DIRS:
            scrub(root, keep)

    def run_batch(self, steps: list[dict[str, Any]], stop_on_failure: bool) -> int:
        self.write_results(done=False)
        for index, step in enumerate(steps):
            started = time.monotonic()
            # a seed followed by another dbt step leaves the relation bound to that step, whose database
            # holds the seeds' tables too (the check opens the database: ~0.3 s of a small build)
            check_sizes = not (
                step.get("kind") == "dbt"
                and list(step.get("args", []))[:1] == ["seed"]
                and index + 1 < len(steps)
                and steps[index + 1].get("kind") == "dbt"
            )
            try:
                result = self.run_step(step, check_sizes)
            except Exception as exc:
                result = {
                    "kind": step.get("kind", "?"),
                    "ok": False,
                    "first_error": one_line(f"{type(exc).__name__}: {exc}"),
                    "detail": {"traceback": traceback.format_exc()[-4000:]},
                }
            result["detail"]["wall_s"] = round(time.monotonic() - started, 3)
            self.results.append(result)
            self.write_results(done=False)
            if not result["ok"] and stop_on_failure:
                break
        self.write_results(done=True)
        return 0

    def run_step(self, step: dict[str, Any], check_sizes: bool = True) -> dict[str, Any]:
        kind = step["kind"]
        if kind == "dbt":
            return self.dbt_step(list(step["args"]), check_sizes)
        if kind == "capture":
            return self.capture_step(step["out"], step["manifest"])
        if kind == "query":
            return self.query_step(step["db"], step["sql"], int(step["max_rows"]))
        if kind == "write":
            return self.write_step(step["path"], step["text"])
        if kind == "restore":
            return self.restore_step(step["source"])
        raise ValueError(f"unknown step kind {kind!r}")

    # variants ------------------------------------------------------------------------------------
    def inside_workspace(self, relative: str) -> Path:
        """``relative`` under the workspace, refusing a path whose real parent folder leaves it."""
        target = self.workspace / relative
        root = os.path.realpath(self.workspace)
        parent = os.path.realpath(target.parent)
        if parent != root and not parent.startswith(root + os.sep):
            raise ValueError(f"{relative} resolves outside the workspace")
        if target.is_symlink():
            target.unlink()
        return target

    def write_step(self, relative: str, text: str) -> dict[str, Any]:
        target = self.inside_workspace(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.harvest-tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
        return {"kind": "write", "ok": True, "first_error": "", "detail": {}}

    def restore_step(self, relative: str) -> dict[str, Any]:
        import shutil

        source = self.inside_workspace(relative)
        if source.is_symlink() or not source.is_file():
            raise ValueError(f"{relative} is not a database file in the workspace")
        release_dbt_duckdb()
        for stale in (self.db_path, self.db_path.with_name(self.db_path.name + ".wal")):
            if stale.is_symlink() or stale.exists():
                stale.unlink()
        shutil.copyfile(source, self.db_path)
        return {"kind": "restore", "ok": True, "first_error": "", "detail": {}}

    # dbt -----------------------------------------------------------------------------------------
    def profile_meta(self) -> dict[str, Any]:
        """The meta file the harvester wrote beside the profile ({} when there is none: a bare run)."""
        meta = self.profiles_dir / str(self.request.get("profile_meta") or "")
        if not self.request.get("profile_meta") or not meta.is_file() or meta.is_symlink():
            return {}
        try:
            raw = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return raw if isinstance(raw, dict) else {}

    def profile_flags(self, args: list[str]) -> list[str]:
        """What every dbt command gets from the profile the harvester wrote (its meta file):

        - ``--profile NAME``: a project whose dbt_project.yml has no ``profile:`` key is refused by dbt
          without it, and for every other project the name is the one the project declares;
        - ``--exclude`` of the pin's known failing tests on ``build`` and ``test`` (core.pin.BaselineTest):
          they failed on the original project, so they never gate a model nor count as a check.
        """
        meta = self.profile_meta()
        name = meta.get("profile_name")
        flags = ["--profile", name] if isinstance(name, str) and _PROFILE_NAME.fullmatch(name) else []
        command = next((a for a in args if not a.startswith("-")), "")
        excluded = meta.get("exclude_tests") or []
        if (
            command in ("build", "test")
            and isinstance(excluded, list)
            and excluded
            and all(isinstance(e, str) and _TEST_SELECTOR.fullmatch(e) for e in excluded)
        ):
            flags += ["--exclude", *excluded]
        return flags

    def dbt_step(self, args: list[str], check_sizes: bool = True) -> dict[str, Any]:
        """One dbt command in-process; ``check_sizes``: fail it when a relation is over the row bound."""
        from dbt.cli.main import dbtRunner

        if self.runner is None:
            self.runner = dbtRunner()
        argv = [
            *args,
            "--project-dir",
            str(self.project),
            "--profiles-dir",
            str(self.profiles_dir),
            *self.profile_flags(args),
        ]
        try:
            res = self.runner.invoke(argv)
        finally:
            release_dbt_duckdb()
        nodes = []
        for node_result in getattr(res.result, "results", None) or []:
            node = getattr(node_result, "node", None)
            status = getattr(node_result, "status", "")
            nodes.append(
                {
                    "unique_id": str(getattr(node, "unique_id", "")),
                    "resource_type": str(getattr(getattr(node, "resource_type", ""), "value", "")),
                    "status": str(getattr(status, "value", status)),
                    "message": summarize_message(getattr(node_result, "message", "") or ""),
                }
            )
        first_error = ""
        if res.exception is not None:
            first_error = summarize_message(f"dbt: {res.exception}")
        else:
            for node in nodes:
                if node["status"] in FAILED_NODE_STATUSES:
                    first_error = one_line(f"{node['unique_id']}: {node['message'] or node['status']}")
                    break
        ok = bool(res.success)
        if ok and check_sizes:
            oversized = self.oversized_relation()
            if oversized:
                ok, first_error = False, oversized
        elif not first_error:
            first_error = "dbt reported failure without a node error (see the build log)"
        return {"kind": "dbt", "ok": ok, "first_error": first_error, "detail": {"nodes": nodes}}

    def locked_connection(
        self, db: Path, read_only: bool, extra_paths: tuple[str, ...] = (), setup: tuple[str, ...] = ()
    ) -> Any:
        import duckdb

        conn = duckdb.connect(str(db), read_only=read_only)
        harvest_lockdown.apply_lockdown(conn, harvest_lockdown.LOCKDOWN, extra_paths, setup)
        return conn

    def oversized_relation(self) -> str:
        """The first table in the build database with more rows than allowed, as an error line."""
        if not self.db_path.exists():
            return ""
        conn = self.locked_connection(self.db_path, read_only=True)
        try:
            rows = conn.execute(
                "SELECT schema_name, table_name, estimated_size FROM duckdb_tables() "
                "WHERE NOT internal AND NOT temporary AND estimated_size > ? ORDER BY estimated_size DESC",
                [self.relation_rows],
            ).fetchall()
        finally:
            conn.close()
        if not rows:
            return ""
        schema, name, size = rows[0]
        return f"relation {schema}.{name} has {size} rows, over the per-relation limit of {self.relation_rows}"

    # capture -------------------------------------------------------------------------------------
    def capture_step(self, out: str, manifest_rel: str) -> dict[str, Any]:
        """Copy the manifest's model relations into ``out``, named by ``harvest_names.captured_names``."""
        manifest = json.loads((self.project / manifest_rel).read_text(encoding="utf-8"))
        out_path = self.workspace / out
        for stale in (out_path, out_path.with_name(out_path.name + ".wal")):
            stale.unlink(missing_ok=True)
        models = sorted(
            (node for node in manifest.get("nodes", {}).values() if is_captured_model(node)),
            key=lambda node: node["unique_id"],
        )
        names = captured_names(
            (str(n["unique_id"]), str(n["schema"]), str(n.get("alias") or n["name"])) for n in models
        )
        catalog = self.db_path.stem
        # read-write so that the gold file can be attached writable; the build database is only read,
        # and it stays the default catalog so views resolve exactly as they did in the build
        conn = self.locked_connection(
            self.db_path, read_only=False, extra_paths=(str(out_path),), setup=CAPTURE_SETTINGS
        )
        tables: list[dict[str, Any]] = []
        errors: list[str] = []
        try:
            conn.execute(f"ATTACH {sql_string(str(out_path))} AS {quote_identifier(GOLD_ALIAS)}")
            existing = {
                (schema.lower(), name.lower())
                for schema, name in conn.execute(
                    "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ? "
                    "UNION ALL SELECT schema_name, view_name FROM duckdb_views() "
                    "WHERE database_name = ? AND NOT internal",
                    [catalog, catalog],
                ).fetchall()
            }
            for node in models:
                schema, alias = str(node["schema"]), str(node.get("alias") or node["name"])
                database = str(node.get("database") or catalog)
                if database.lower() != catalog.lower():
                    errors.append(f"{node['unique_id']}: relation in database {database!r}, not {catalog!r}")
                    continue
                if (schema.lower(), alias.lower()) not in existing:
                    errors.append(f"{node['unique_id']}: relation {schema}.{alias} was not built")
                    continue
                table, error = self.capture_one(
                    conn, catalog, schema, alias, node["unique_id"], names[node["unique_id"]]
                )
                if error:
                    errors.append(error)
                else:
                    tables.append(table)
            seed_rows = 0
            for node in manifest.get("nodes", {}).values():
                if node.get("resource_type") != "seed":
                    continue
                schema, alias = str(node["schema"]), str(node.get("alias") or node["name"])
                if (schema.lower(), alias.lower()) in existing:
                    seed_rows += conn.execute(
                        f"SELECT count(*) FROM {quote_relation(catalog, schema, alias)}"
                    ).fetchone()[0]
            conn.execute(f"CHECKPOINT {quote_identifier(GOLD_ALIAS)}")
            conn.execute(f"DETACH {quote_identifier(GOLD_ALIAS)}")
        finally:
            conn.close()
        first_error = one_line(errors[0]) if errors else ""
        if len(errors) > 1:
            first_error = one_line(f"{errors[0]} (and {len(errors) - 1} more)")
        return {
            "kind": "capture",
            "ok": not errors,
            "first_error": first_error,
            "detail": {"tables": tables, "seed_rows": int(seed_rows), "errors": errors[:50]},
        }

    def capture_one(
        self, conn: Any, catalog: str, schema: str, alias: str, unique_id: str, name: str
    ) -> tuple[dict[str, Any], str]:
        import duckdb

        gold_schema = name.split(".", 1)[0]
        source = quote_relation(catalog, schema, alias)
        target = quote_relation(GOLD_ALIAS, gold_schema, alias)
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_relation(GOLD_ALIAS, gold_schema)}")
        try:
            conn.execute(f"CREATE TABLE {target} AS SELECT * FROM {source}")
        except duckdb.Error as exc:  # a view dbt created but that fails when read in full (no test read it all)
            return {}, f"{unique_id}: relation {schema}.{alias} cannot be read after the build: {one_line(str(exc))}"
        rows = conn.execute(f"SELECT count(*) FROM {target}").fetchone()[0]
        if rows > self.relation_rows:
            conn.execute(f"DROP TABLE {target}")
            return {}, (
                f"{unique_id}: relation {schema}.{alias} has {rows} rows, over the per-relation limit "
                f"of {self.relation_rows}"
            )
        columns = [
            [str(name), str(col_type)]
            for name, col_type in conn.execute(
                "SELECT column_name, data_type FROM duckdb_columns() "
                "WHERE database_name = ? AND schema_name = ? AND table_name = ? ORDER BY column_index",
                [GOLD_ALIAS, gold_schema, alias],
            ).fetchall()
        ]
        if alias_collides([name for name, _ in columns]):
            return {}, f"{unique_id}: a column is named like the fingerprint's row alias; cannot fingerprint"
        fingerprint = conn.execute(fingerprint_sql(target)).fetchone()[0]
        return {
            "name": name,
            "unique_id": unique_id,
            "rows": int(rows),
            "columns": columns,
            "fingerprint": str(fingerprint),
        }, ""

    # query ---------------------------------------------------------------------------------------
    def query_step(self, db: str, sql: str, max_rows: int) -> dict[str, Any]:
        conn = self.locked_connection(self.workspace / db, read_only=True)
        try:
            cursor = conn.execute(sql)
            description = cursor.description or []
            fetched = cursor.fetchmany(max_rows + 1)
        finally:
            conn.close()
        columns = [[str(col[0]), str(col[1])] for col in description]
        rows = [[json_safe(value) for value in row] for row in fetched[:max_rows]]
        return {
            "kind": "query",
            "ok": True,
            "first_error": "",
            "detail": {"columns": columns, "rows": rows, "truncated": len(fetched) > max_rows},
        }


#: modules a seed + build loads lazily; imported before the first fork so that no batch pays for them
WARM_MODULES = (
    "dbt.task.seed",
    "dbt.task.build",
    "dbt.task.run",
    "dbt.task.test",
    "dbt.task.compile",
    "dbt.parser.manifest",
    "dbt.adapters.duckdb.impl",
    "dbt.adapters.duckdb.environments.local",
    "dbt_common.clients.agate_helper",
    "agate",
    "babel.dates",
    "duckdb",
)
#: the dbt classes a parse, seed and build validate against their JSON schema (dbt 1.11; profiled: the
#: node and config classes cost ~1.8 s of a first full parse, paid once here instead of in every batch)
SCHEMA_CLASSES = (
    "dbt.contracts.project.Configuration",
    "dbt.contracts.project.PackageConfig",
    "dbt.contracts.project.ProfileConfig",
    "dbt.contracts.project.Project",
    "dbt.contracts.project.ProjectFlags",
    "dbt.contracts.selection.SelectorFile",
    "dbt.task.test.TestResultData",
    "dbt.adapters.duckdb.credentials.DuckDBCredentials",
    "dbt.contracts.graph.nodes.ModelNode",
    "dbt.contracts.graph.nodes.SeedNode",
    "dbt.contracts.graph.nodes.SingularTestNode",
    "dbt.contracts.graph.nodes.GenericTestNode",
    "dbt.contracts.graph.nodes.SourceDefinition",
    "dbt.contracts.graph.unparsed.UnparsedModelUpdate",
    "dbt.contracts.graph.unparsed.UnparsedNodeUpdate",
    "dbt.contracts.graph.unparsed.UnparsedSourceDefinition",
    "dbt.artifacts.resources.v1.model.ModelConfig",
    "dbt.artifacts.resources.v1.seed.SeedConfig",
    "dbt.artifacts.resources.v1.config.TestConfig",
    "dbt.artifacts.resources.v1.source_definition.SourceConfig",
    "dbt.artifacts.resources.v1.components.Contract",
)


def fork_running(task: Any) -> int:
    """Fork; the copy runs ``task()`` and ends with os._exit (0, or 1 when it raised), never returning
    into the caller's code. Returns the copy's pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            task()
            code = 0
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def warm_up_dbt() -> None:
    """Import dbt and the modules a seed + build loads lazily, and build the JSON schemas dbt validates its
    configuration against, so a forked batch starts with them ready. Nothing is invoked: a dbt invocation
    leaves threads and held locks behind, and a fork made after it can deadlock. No project code runs here."""
    from dbt.cli.main import dbtRunner  # noqa: F401

    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except Exception:
            pass
    for name in SCHEMA_CLASSES:  # each class builds its JSON schema on first validation (~1 s in all)
        module, _, attr = name.rpartition(".")
        try:
            getattr(importlib.import_module(module), attr).json_schema()
        except Exception:
            pass


#: the sandbox's private writable folders outside the workspace, scrubbed after each isolated batch
SCRUBBED_DIRS = ("/tmp", "/dev/shm")


def tree_paths(root: str) -> set[str]:
    """Every path under ``root`` (not descending into mount points or links), ``root`` included."""
    found = {root}
    try:
        entries = list(os.scandir(root))
    except OSError:
        return found
    for entry in entries:
        found.add(entry.path)
        if entry.is_dir(follow_symlinks=False) and not os.path.ismount(entry.path):
            found |= tree_paths(entry.path)
    return found


def scrub(root: str, keep: set[str]) -> None:
    """Remove everything under ``root`` that was not there when the warm child started (links are
    removed, never followed; mount points are left alone)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        if os.path.ismount(entry.path):
            continue
        if entry.is_dir(follow_symlinks=False):
            scrub(entry.path, keep)
            if entry.path not in keep:
                try:
                    os.rmdir(entry.path)
                except OSError:
                    pass
        elif entry.path not in keep:
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def kill_namespace_others() -> None:
    """SIGKILL every process of this PID namespace but this one and its ancestors (bubblewrap's init):
    what a batch started and left running must not outlive it. Only ever called inside bubblewrap."""
    import signal

    spare = {os.getpid(), os.getppid(), 1}
    for _ in range(3):  # a process may fork while we walk
        others = [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) not in spare]
        if not others:
            return
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def release_dbt_duckdb() -> None:
    """Close the DuckDB instance dbt-duckdb keeps open between invocations.

    dbt-duckdb holds one environment (and its database) per process; while it is open, our own locked
    connections to the same file would be refused ("different configuration"), and a later dbt
    invocation would inherit state. Closing it makes every step start from the file on disk.
    """
    import gc

    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    with DuckDBConnectionManager._LOCK:
        env = DuckDBConnectionManager._ENV
        DuckDBConnectionManager._ENV = None
    if env is not None:
        try:
            env.close()
        except Exception:
            pass
    gc.collect()


def sql_string(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def is_captured_model(node: dict[str, Any]) -> bool:
    """A model that exists as a relation: tables, views, incrementals — not ephemerals."""
    if node.get("resource_type") != "model":
        return False
    materialized = str((node.get("config") or {}).get("materialized", ""))
    return materialized != "ephemeral"


def patch_sleep_for_faketime() -> None:
    """Make time.sleep work under libfaketime with FAKETIME_DONT_FAKE_MONOTONIC=1.

    Python 3.11 sleeps with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), which libfaketime 0.9.x
    answers with EINVAL when it leaves the monotonic clock real. Lock and condition timeouts work, so a
    sleep that fails that way waits on an Event instead. Faking the monotonic clock too is worse: every
    lock acquire with a timeout then waits forever.
    """
    import threading

    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        try:
            real_sleep(seconds)
        except OSError as exc:
            if exc.errno != 22:
                raise
            threading.Event().wait(seconds)

    time.sleep = sleep


def load_locked_duckdb(path: str) -> None:
    """Load the project's one locked-down DuckDB module (bound into the sandbox as a single file)."""
    spec = importlib.util.spec_from_file_location("locked_duckdb", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load locked_duckdb from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["locked_duckdb"] = module
    spec.loader.exec_module(module)


def main(argv: list[str]) -> int:
    global harvest_lockdown
    request = json.loads(argv[1])
    load_locked_duckdb(request["locked_duckdb"])
    import harvest_lockdown as lockdown_module

    harvest_lockdown = lockdown_module
    # dbt-duckdb 1.5 reads a plugin module named without a dot as one of its own plugins
    # (dbt.adapters.duckdb.plugins.<name>): the same module answers there too (a pin's toolchain may be 1.5)
    sys.modules.setdefault(f"dbt.adapters.duckdb.plugins.{lockdown_module.__name__}", lockdown_module)
    if os.environ.get("FAKETIME"):
        patch_sleep_for_faketime()
    os.chdir(request["workspace"])
    return Child(request).run()


if __name__ == "__main__":
    exit_code = main(sys.argv)
    # Every result is on disk (written and renamed), dbt's DuckDB closed and stdout flushed: skip the
    # interpreter's teardown of everything dbt imported (measured: 0.7 s of a small build's child).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
