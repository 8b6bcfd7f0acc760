"""The completion format of single-turn repair: what the model writes and how a reward reads it.

Decision: the model answers with the FULL corrected content of each file it changes, one block each::

    <file path="models/orders.sql">
    select …
    </file>

Full files, not diffs, because dbt model files are short and a small model gets line numbers and
context lines of a diff wrong far more often than it gets SQL wrong; SFT rows teach this format. A
unified diff (bare, or in a ```diff fence) is also accepted, applied strictly (core/patching.py).
Text outside the blocks (reasoning, prose) is ignored. Anything else is malformed and scores 0:
no block, a path that is not an existing project file, a path given twice, an absolute or ``..``
path, a diff that does not apply.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Mapping

from dbt_harvest.core.patching import PatchError
from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.train.project import apply_diff

_FILE_BLOCK = re.compile(r'<file path="([^"\n]+)">\n?(.*?)</file>', re.DOTALL)
_DIFF_FENCE = re.compile(r"```(?:diff|patch)\n(.*?)```", re.DOTALL)


class MalformedCompletion(ValueError):
    """The completion holds no usable edit; the reason is logged and the reward is 0."""


def render_files(files: Mapping[str, str]) -> str:
    """Render corrected files in the completion format (the SFT target)."""
    blocks = []
    for path, text in files.items():
        body = text if text.endswith("\n") else text + "\n"
        blocks.append(f'<file path="{path}">\n{body}</file>')
    return "\n".join(blocks)


def _safe_path(path: str) -> str:
    norm = posixpath.normpath(path.strip())
    if norm.startswith(("/", "../")) or norm == ".." or "\\" in norm or norm in ("", "."):
        raise MalformedCompletion(f"unsafe path {path!r}")
    return norm


def missing_files(task: TaskRecord) -> tuple[str, ...]:
    """The files a completion may create for ``task``: a completion task's missing models (the files its
    broken patch removes), none for a repair."""
    if task.kind != "completion":
        return ()
    from dbt_harvest.core.patching import parse_patch

    return tuple(p.path for p in parse_patch(task.broken_patch) if p.deleted)


def parse_completion(text: str, project: Mapping[str, str], creatable: Collection[str] = ()) -> dict[str, str]:
    """Return path -> new content for each file the completion edits; raise MalformedCompletion.

    ``creatable``: files the completion may write although the project does not have them (a completion
    task's missing model); any other new path is refused, as an edit of a file the project lacks."""
    if not isinstance(text, str) or not text.strip():
        raise MalformedCompletion("empty completion")
    blocks = _FILE_BLOCK.findall(text)
    if blocks:
        edits: dict[str, str] = {}
        for raw_path, body in blocks:
            path = _safe_path(raw_path)
            if path in edits:
                raise MalformedCompletion(f"{path} is given twice")
            if path not in project and path not in creatable:
                raise MalformedCompletion(f"{path} is not a file of the project")
            edits[path] = body if body.endswith("\n") or body == "" else body + "\n"
        return edits
    fenced = _DIFF_FENCE.findall(text)
    diff = "\n".join(fenced) if fenced else text
    if "--- " not in diff or "+++ " not in diff:
        raise MalformedCompletion('no <file path="…"> block and no unified diff')
    try:
        return apply_diff(project, diff)
    except PatchError as exc:
        raise MalformedCompletion(f"diff does not apply: {exc}") from None


def completion_text(completion: object) -> str:
    """trl hands completions as text or as a list of chat messages; return the assistant's text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(
            str(m.get("content") or "") for m in completion if isinstance(m, dict) and m.get("role") == "assistant"
        )
    return ""
