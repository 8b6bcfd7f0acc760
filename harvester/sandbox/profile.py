"""The fixed dbt-duckdb profile of a sandboxed build, written into the workspace.

The profile points dbt at a DuckDB file inside the workspace, one thread, and the lockdown plugin
(inside/harvest_lockdown.py). Its folder is bound read-only into the sandbox, so project code cannot
rewrite it between steps. A small JSON beside it tells the runner (outside the sandbox) where the
database lives; the runner reads it before starting the child, never after. Both are written and read
through ``safe_fs`` (the workspace may hold links a previous build planted).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from dbt_harvest.core.errors import SandboxError
from dbt_harvest.core.toolchain import Toolchain
from dbt_harvest.harvester.sandbox import safe_fs
from dbt_harvest.harvester.sandbox.steps import workspace_relative
from dbt_harvest.harvester.toolchain import ensure_toolchain

PROFILE_DIR = ".harvest_profile"
META_FILE = "harvest_profile.json"
WORKSPACE_ENV = "HARVEST_WORKSPACE"
PLUGIN_MODULE = "harvest_lockdown"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_TEST_SELECTOR = re.compile(r"^resource_type:(test|unit_test),[A-Za-z0-9_]+$")
MAX_META_BYTES = 64 << 10


@dataclass(frozen=True)
class ProfileMeta:
    """What the runner needs to know about a written profile."""

    project_dir: str
    profile_name: str
    schema: str
    db_file: str
    # dbt selectors of the pin's known failing tests (core.pin.Pin.excluded_tests): the sandboxed child
    # leaves them out of every ``build`` and ``test``
    exclude_tests: tuple[str, ...] = ()
    # the toolchain the pin's builds run under (``core.toolchain.Toolchain.name``, made under
    # HARVEST_HOME/toolchains by ``harvester.toolchain``); "" runs the dbt this process has installed
    toolchain: str = ""


def _real_dir(workspace: Path, rel: str) -> None:
    """Make ``rel`` a real directory, removing whatever else (a symlink from the repo) sits there."""
    entry = safe_fs.lstat(workspace, rel)
    if entry is not None and entry.kind != "dir":
        safe_fs.remove(workspace, rel)
    safe_fs.make_dirs(workspace, rel)


def ensure_profile_dir(workspace: Path) -> Path:
    """``<workspace>/.harvest_profile`` as a real folder (a sandbox binds it read-only before
    write_profile fills it: ``harvester.sandbox.parallel``); whatever else the tree put there is removed."""
    _real_dir(Path(workspace), PROFILE_DIR)
    return Path(workspace) / PROFILE_DIR


def plain_profile_text(profile_name: str, schema: str, db_file: str) -> str:
    """profiles.yml for running dbt by hand (outside our sandbox) in the project folder: DuckDB at ./<db_file>.

    Spider 2.0-DBT's examples and `harvest tasks materialize` ship this one; sandboxed builds write their own."""
    doc = {
        profile_name: {
            "target": "dev",
            "outputs": {"dev": {"type": "duckdb", "path": f"./{db_file}", "schema": schema, "threads": 1}},
        }
    }
    return json.dumps(doc, indent=2) + "\n"


def profile_yaml(profile_name: str, schema: str, db_file: str) -> str:
    """The profiles.yml text (JSON is valid YAML, so no quoting rules can bite)."""
    doc = {
        profile_name: {
            "target": "harvest",
            "outputs": {
                "harvest": {
                    "type": "duckdb",
                    "path": f"{{{{ env_var('{WORKSPACE_ENV}') }}}}/{db_file}",
                    "schema": schema,
                    "threads": 1,
                    "plugins": [{"module": PLUGIN_MODULE}],
                }
            },
        }
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def write_profile(
    workspace: Path,
    project_dir: str,
    profile_name: str,
    schema: str = "main",
    db_file: str = "build.duckdb",
    exclude_tests: tuple[str, ...] = (),
    toolchain: Toolchain | None = None,
) -> Path:
    """Write ``<workspace>/.harvest_profile/profiles.yml`` for a sandboxed build; return its path.

    ``exclude_tests``: selectors of the pin's known failing tests, left out of every dbt build and test.
    ``toolchain``: the pin's (``Pin.toolchain``): made here if this home lacks it, and every child started on
    the workspace runs its interpreter."""
    workspace = Path(workspace)
    if not workspace.is_dir():
        raise SandboxError(f"workspace {workspace} is not a directory")
    project_dir = workspace_relative(project_dir, "project_dir") if project_dir not in ("", ".") else "."
    db_file = workspace_relative(db_file, "db_file")
    if not db_file.endswith(".duckdb") or "/" in db_file:
        raise SandboxError(f"db_file must be a file name ending in .duckdb at the workspace root, got {db_file!r}")
    for what, value in (("profile_name", profile_name), ("schema", schema)):
        if not _NAME.match(value):
            raise SandboxError(f"{what} must be a plain identifier, got {value!r}")
    if not safe_fs.is_file(workspace, f"{project_dir}/dbt_project.yml"):
        raise SandboxError(f"no dbt_project.yml in {workspace / project_dir}")
    bad = next((e for e in exclude_tests if not _TEST_SELECTOR.match(e)), None)
    if bad is not None:
        raise SandboxError(f"an excluded test must be a 'resource_type:test,<name>' selector, got {bad!r}")
    _real_dir(workspace, PROFILE_DIR)
    safe_fs.write_text(workspace, f"{PROFILE_DIR}/profiles.yml", profile_yaml(profile_name, schema, db_file))
    meta = ProfileMeta(
        project_dir=project_dir,
        profile_name=profile_name,
        schema=schema,
        db_file=db_file,
        exclude_tests=tuple(sorted(set(exclude_tests))),
        toolchain=ensure_toolchain(toolchain).name if toolchain is not None else "",
    )
    fields = {**meta.__dict__, "exclude_tests": list(meta.exclude_tests)}
    if not meta.toolchain:
        del fields["toolchain"]
    safe_fs.write_text(workspace, f"{PROFILE_DIR}/{META_FILE}", json.dumps(fields, sort_keys=True) + "\n")
    return workspace / PROFILE_DIR / "profiles.yml"


def read_profile_meta(workspace: Path, project_dir: str) -> ProfileMeta:
    """The meta written by write_profile; refuse when it is missing or names another project."""
    path = Path(workspace) / PROFILE_DIR / META_FILE
    if not safe_fs.is_file(workspace, f"{PROFILE_DIR}/{META_FILE}"):
        raise SandboxError(f"no sandbox profile in {workspace}; call write_profile(workspace, …) first")
    try:
        raw = json.loads(safe_fs.read_text(workspace, f"{PROFILE_DIR}/{META_FILE}", max_bytes=MAX_META_BYTES))
        meta = ProfileMeta(
            **{key: str(raw[key]) for key in ("project_dir", "profile_name", "schema", "db_file")},
            exclude_tests=tuple(str(e) for e in raw.get("exclude_tests", ())),
            toolchain=str(raw.get("toolchain", "")),
        )
    except (ValueError, KeyError, TypeError, safe_fs.UnsafePathError) as exc:
        raise SandboxError(f"sandbox profile meta {path} is malformed ({exc}); call write_profile again") from exc
    wanted = workspace_relative(project_dir, "project_dir") if project_dir not in ("", ".") else "."
    if meta.project_dir != wanted:
        raise SandboxError(
            f"the sandbox profile in {workspace} was written for project {meta.project_dir!r}, not {wanted!r}"
        )
    return meta
