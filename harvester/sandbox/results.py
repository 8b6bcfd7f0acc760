"""Reading the child's results file: untrusted JSON, checked for shape and size before it is believed.

Code from the project runs in the same process as the child, so the file can hold anything. We open it
beneath the workspace without following any link (``safe_fs``), cap its size, and keep only fields of
the expected types; anything else makes the step a failure with a clear reason instead of a crash in
the parent.
"""

from __future__ import annotations

import errno
import json
import re
from pathlib import Path
from typing import Any

from dbt_harvest.harvester.sandbox import safe_fs
from dbt_harvest.harvester.sandbox.steps import StepResult

MAX_RESULT_BYTES = 64 << 20
MAX_LINE = 600
_HEX32 = re.compile(r"^[0-9a-f]{32}$")


class ResultShapeError(ValueError):
    """The child's results file is missing, too large, or not shaped as expected."""


def _line(value: Any) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


def read_result_file(workspace: Path, rel: str) -> dict[str, Any]:
    """Load the results JSON at ``rel`` in ``workspace``: beneath it, no link followed, a regular file,
    no more than the cap."""
    try:
        data = safe_fs.read_bytes(workspace, rel, max_bytes=MAX_RESULT_BYTES)
    except safe_fs.UnsafePathError as exc:
        if getattr(exc, "errno", None) == errno.ENOENT:
            raise ResultShapeError("the sandbox child wrote no results") from None
        raise ResultShapeError(f"the sandbox child's results file cannot be opened safely ({exc})") from None
    try:
        payload = json.loads(data)
    except ValueError as exc:
        raise ResultShapeError(f"the sandbox child's results are not valid JSON ({exc})") from exc
    if not isinstance(payload, dict) or payload.get("version") != 1 or not isinstance(payload.get("steps"), list):
        raise ResultShapeError("the sandbox child's results have an unexpected shape")
    return payload


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ResultShapeError(f"expected a string, got {type(value).__name__}")
    return value


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ResultShapeError(f"expected a non-negative integer, got {value!r}"[:200])
    return value


def _dbt_detail(detail: dict[str, Any]) -> dict[str, Any]:
    nodes = detail.get("nodes", [])
    if not isinstance(nodes, list):
        raise ResultShapeError("dbt nodes is not a list")
    clean = []
    for node in nodes:
        if not isinstance(node, dict):
            raise ResultShapeError("a dbt node result is not an object")
        clean.append(
            {key: _line(_str(node.get(key, ""))) for key in ("unique_id", "resource_type", "status", "message")}
        )
    return {"nodes": clean}


def _capture_detail(detail: dict[str, Any]) -> dict[str, Any]:
    tables = detail.get("tables", [])
    if not isinstance(tables, list):
        raise ResultShapeError("capture tables is not a list")
    clean = []
    for table in tables:
        if not isinstance(table, dict):
            raise ResultShapeError("a captured table is not an object")
        columns = table.get("columns")
        if not isinstance(columns, list) or not all(
            isinstance(col, list) and len(col) == 2 and all(isinstance(part, str) for part in col) for col in columns
        ):
            raise ResultShapeError("a captured table's columns are malformed")
        fingerprint = _str(table.get("fingerprint"))
        if not _HEX32.match(fingerprint):
            raise ResultShapeError("a captured table's fingerprint is not 32 hex characters")
        clean.append(
            {
                "name": _str(table.get("name")),
                "unique_id": _str(table.get("unique_id")),
                "rows": _int(table.get("rows")),
                "columns": [(name, col_type) for name, col_type in columns],
                "fingerprint": fingerprint,
            }
        )
    errors = detail.get("errors", [])
    return {
        "tables": clean,
        "seed_rows": _int(detail.get("seed_rows", 0)),
        "errors": [_line(e) for e in errors[:50]] if isinstance(errors, list) else [],
    }


def _query_detail(detail: dict[str, Any]) -> dict[str, Any]:
    columns, rows = detail.get("columns", []), detail.get("rows", [])
    if not isinstance(columns, list) or not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise ResultShapeError("query columns or rows are malformed")
    return {"columns": columns, "rows": rows, "truncated": bool(detail.get("truncated", False))}


def _no_detail(detail: dict[str, Any]) -> dict[str, Any]:
    return {}


_DETAIL = {
    "dbt": _dbt_detail,
    "capture": _capture_detail,
    "query": _query_detail,
    "write": _no_detail,
    "restore": _no_detail,
}


def parse_steps(payload: dict[str, Any], expected_kinds: list[str]) -> list[StepResult]:
    """StepResults for the steps the child reports, checked against the kinds that were requested."""
    raw_steps = payload["steps"]
    if len(raw_steps) > len(expected_kinds):
        raise ResultShapeError("the sandbox child reports more steps than were requested")
    results = []
    for raw, kind in zip(raw_steps, expected_kinds):
        if not isinstance(raw, dict) or raw.get("kind") != kind or not isinstance(raw.get("ok"), bool):
            raise ResultShapeError(f"a {kind} step result has an unexpected shape")
        raw_detail = raw.get("detail")
        detail: dict[str, Any] = raw_detail if isinstance(raw_detail, dict) else {}
        clean = _DETAIL[kind](detail)
        wall = detail.get("wall_s")
        if isinstance(wall, (int, float)) and not isinstance(wall, bool):
            clean["wall_s"] = float(wall)
        if isinstance(detail.get("traceback"), str):
            clean["traceback"] = detail["traceback"][-4000:]
        first_error = _line(raw.get("first_error", ""))
        if not raw["ok"] and not first_error:
            first_error = f"{kind} step failed without a reason"
        results.append(StepResult(kind=kind, ok=raw["ok"], first_error=first_error, detail=clean))
    return results


def peak_rss(payload: dict[str, Any]) -> int:
    """The child's own peak RSS as it reports it (0 when absent or malformed)."""
    value = payload.get("peak_rss_bytes", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
