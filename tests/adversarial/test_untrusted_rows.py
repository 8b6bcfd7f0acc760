"""Rows from someone else's dataset (issue 36): each test rewrites one row of a real built dataset as an
attacker would (and re-hashes the manifest, as a publisher can), plants a canary on the host, and runs the
command a user runs on downloaded rows (`harvest tasks materialize`, `harvest score --task`). Every hostile row
is refused with one line and exit 1, and nothing outside the output folder and HARVEST_HOME is read, written
or deleted. The rows are the eval world's dev tasks on the embedded example (a real sandboxed harvest)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.adversarial.conftest import HARVEST, _env

pytestmark = pytest.mark.slow

CANARY = "CANARY-5e1f-host-secret"


def _rewrite(folder: Path, copy: Path, change: Callable[[dict[str, Any]], None], instance_id: str) -> Path:
    """``folder`` copied to ``copy`` with ``change`` applied to one row, and the manifest re-hashed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.copytree(folder, copy)
    for path in copy.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
    manifest = json.loads((copy / "build.json").read_text())
    for rel in manifest["files"]:
        if rel.startswith("data/dev-") and rel.endswith(".parquet"):
            table = pq.read_table(copy / rel)
            rows = table.to_pylist()
            for row in rows:
                if row["instance_id"] == instance_id:
                    change(row)
            pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), copy / rel)
            manifest["files"][rel] = hashlib.sha256((copy / rel).read_bytes()).hexdigest()
    (copy / "build.json").write_text(json.dumps(manifest, indent=1))
    return copy


def _run(tmp: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = _env(tmp, **extra)
    Path(env["HARVEST_HOME"]).mkdir(parents=True, exist_ok=True)
    return subprocess.run([*HARVEST, *args], env=env, capture_output=True, text=True, timeout=600, cwd=tmp)


def _refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in lines[0], lines[0]


def _canary_folder(tmp: Path) -> Path:
    folder = tmp / "host" / "important"
    folder.mkdir(parents=True)
    (folder / "keep.txt").write_text(CANARY)
    (folder / "dbt_project.yml").write_text("name: host_project\n")
    return folder


def _untouched(folder: Path) -> None:
    assert sorted(p.name for p in folder.iterdir()) == ["dbt_project.yml", "keep.txt"]
    assert (folder / "keep.txt").read_text() == CANARY


def _materialize(
    tmp: Path, copy: Path, instance_id: str, mirror: Path, packages: Path
) -> subprocess.CompletedProcess[str]:
    """`harvest tasks materialize` as a user runs it (a subprocess on a fresh HARVEST_HOME)."""
    return _run(
        tmp,
        "tasks",
        "materialize",
        str(copy),
        instance_id,
        str(tmp / "out"),
        "--repo-mirror",
        str(mirror),
        "--package-mirror",
        str(packages),
    )


def _refused_here(
    monkeypatch: pytest.MonkeyPatch, tmp: Path, copy: Path, instance_id: str, mirror: Path, packages: Path, *words: str
) -> str:
    """The function `harvest tasks materialize` runs, in this process (cheaper than a CLI start per case):
    it raises a HarvestError of one line; the CLI turns that into `error: ...`, exit 1 (tested apart)."""
    from dbt_harvest.core.errors import HarvestError
    from dbt_harvest.corpora.materialize import materialize_task

    for name, value in _env(tmp).items():
        if name.startswith("HARVEST_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("HARVEST_PACKAGE_MIRROR", str(packages))
    (tmp / "home").mkdir(exist_ok=True)
    with pytest.raises(HarvestError) as caught:
        materialize_task(str(copy), instance_id, tmp / "out", repo_mirror=mirror)
    message = str(caught.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, message
    return message


HOSTILE_PATHS = [
    ("project_dir", lambda host: str(host), "absolute"),
    ("project_dir", lambda host: "../" * 30 + str(host).lstrip("/"), "climbs out"),
    ("project_dir", lambda host: "models\x00x", "NUL"),
    ("pin", lambda host: "harvestlabs__shop_analytics@0123456789ab/../../../" + str(host).lstrip("/"), "not a pin id"),
    ("pin", lambda host: "..", "not a pin id"),
    ("file", lambda host: str(host / "keep.txt"), "absolute"),
    ("database_file", lambda host: str(host / "keep.txt"), "absolute"),
    ("database_file", lambda host: "models/../../keep.txt", "climbs out"),
    ("gold_file", lambda host: str(host / "keep.txt"), "absolute"),
    ("gold_file", lambda host: "gold/../../../" + str(host / "keep.txt").lstrip("/"), "climbs out"),
    ("instance_id", lambda host: "../../escape", "not a task id"),
]


@pytest.mark.parametrize("field, value, why", HOSTILE_PATHS, ids=[f"{f}-{w}" for f, _, w in HOSTILE_PATHS])
def test_a_path_field_that_leaves_its_root_is_refused_before_anything_is_written(
    dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value, why: str
) -> None:
    folder, mirror, packages, ids = dataset
    host = _canary_folder(tmp_path)
    target = ids[0]
    copy = _rewrite(folder, tmp_path / "ds", lambda row: row.__setitem__(field, value(host)), target)
    asked = value(host) if field == "instance_id" else target  # the id the attacker's instructions name
    message = _refused_here(monkeypatch, tmp_path, copy, asked, mirror, packages, why)
    _untouched(host)
    assert not (tmp_path / "out").exists() and CANARY not in message
    home = tmp_path / "home"
    assert not list(home.rglob("templates/*")) and not (home / "gold").exists()  # nothing made for a refused row


def test_the_cli_refuses_a_hostile_row_in_one_line_exit_1(dataset, tmp_path: Path) -> None:
    folder, mirror, packages, ids = dataset
    host = _canary_folder(tmp_path)
    copy = _rewrite(folder, tmp_path / "ds", lambda row: row.__setitem__("project_dir", str(host)), ids[0])
    done = _materialize(tmp_path, copy, ids[0], mirror, packages)
    _refused(done, "project_dir", "absolute")
    _untouched(host)
    assert not (tmp_path / "out").exists()


def test_score_never_deletes_a_host_file_a_row_names(dataset, tmp_path: Path) -> None:
    folder, mirror, packages, ids = dataset
    host = _canary_folder(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    copy = _rewrite(
        folder, tmp_path / "ds", lambda row: row.__setitem__("database_file", str(host / "keep.txt")), ids[0]
    )
    done = _run(tmp_path, "score", "--task", f"{copy}:{ids[0]}", "--workspace", str(ws))
    _refused(done, "database_file", "absolute")
    _untouched(host)


@pytest.mark.parametrize("where", ["origin_url", "package_url", "package_git"])
@pytest.mark.parametrize("scheme", ["path", "file"])
def test_a_row_never_names_a_local_repository(
    dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, scheme: str
) -> None:
    """A local path or file:// in a row would clone a private repository of this machine into the output."""
    from dbt_harvest.harvester.gitrepos import make_git_repo

    folder, mirror, packages, ids = dataset
    secret = tmp_path / "private"
    (secret / "src").mkdir(parents=True)
    (secret / "src" / "dbt_project.yml").write_text(f"name: private\n# {CANARY}\n")
    repo = make_git_repo(secret / "src", secret / "repo.git", bare=True)
    location = str(repo.path) if scheme == "path" else f"file://{repo.path}"

    def change(row: dict[str, Any]) -> None:
        if where == "origin_url":
            row["origin_url"] = location
        elif where == "package_url":
            row["packages"][0]["url"] = location
        else:
            row["packages"][0]["source"] = f"git:{location}"

    copy = _rewrite(folder, tmp_path / "ds", change, ids[0])
    if (where, scheme) == ("origin_url", "file"):  # one through the CLI, the others in process
        _refused(_materialize(tmp_path, copy, ids[0], mirror, packages), "not an https URL")
    else:
        _refused_here(monkeypatch, tmp_path, copy, ids[0], mirror, packages, "not an https URL")
    assert not (tmp_path / "out").exists()
    assert not any(CANARY.encode() in p.read_bytes() for p in (tmp_path / "home").rglob("*") if p.is_file())


def test_ssh_urls_only_when_the_user_opts_in(dataset, tmp_path: Path) -> None:
    from dbt_harvest.corpora.untrusted import UntrustedRowError, check_url

    with pytest.raises(UntrustedRowError, match="HARVEST_ALLOW_SSH_URLS"):
        check_url("git@example.com:acme/x.git", "origin_url", "t", allow_ssh=False)
    assert check_url("git@example.com:acme/x.git", "origin_url", "t", allow_ssh=True)
    assert check_url("https://github.com/acme/x", "origin_url", "t", allow_ssh=False)


def _created_files_patch(count: int) -> str:
    return "".join(f"--- /dev/null\n+++ b/models/gen/f{i}.sql\n@@ -0,0 +1 @@\n+select {i}\n" for i in range(count))


@pytest.mark.parametrize(
    "change, why",
    [
        (
            lambda row: row.__setitem__("broken_patch", row["broken_patch"] + _created_files_patch(150)),
            "HARVEST_ROW_MAX_CREATED_FILES",
        ),
        (lambda row: row.__setitem__("problem_statement", "x" * 70_000), "HARVEST_ROW_MAX_STATEMENT_CHARS"),
        (
            lambda row: row.__setitem__(
                "compat_patch", "--- a/x.sql\n+++ b/x.sql\n@@ -0,0 +1 @@\n+" + "y" * (5 << 20) + "\n"
            ),
            "HARVEST_ROW_MAX_PATCH_BYTES",
        ),
    ],
    ids=["200k-files-style", "huge-statement", "huge-patch"],
)
def test_bounds_refuse_a_row_and_say_how_to_raise_them(
    dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change, why: str
) -> None:
    folder, mirror, packages, ids = dataset
    copy = _rewrite(folder, tmp_path / "ds", change, ids[0])
    _refused_here(monkeypatch, tmp_path, copy, ids[0], mirror, packages, why, "bound")
    assert not (tmp_path / "out").exists() and not list((tmp_path / "home").rglob("gen"))


def test_a_raised_bound_lets_the_row_through(dataset, tmp_path: Path) -> None:
    from dbt_harvest.corpora.untrusted import RowLimits, UntrustedRowError, check_row

    folder, _, _, ids = dataset
    copy = _rewrite(folder, tmp_path / "ds", lambda row: row.__setitem__("problem_statement", "x" * 70_000), ids[0])
    from dbt_harvest.corpora.materialize import dataset_ref, load_rows

    row = next(r for r in load_rows(dataset_ref(str(copy)), "dev")["dev"] if r["instance_id"] == ids[0])
    with pytest.raises(UntrustedRowError, match="problem statement"):
        check_row(row, RowLimits())
    check_row(row, RowLimits.from_env({"HARVEST_ROW_MAX_STATEMENT_CHARS": "100000"}))
    # the documentation-only statement has the same bound and must be text
    long_docs = {**row, "problem_statement": "x", "documentation_statement": "x" * 70_000}
    with pytest.raises(UntrustedRowError, match="documentation statement"):
        check_row(long_docs, RowLimits())
    with pytest.raises(UntrustedRowError, match="documentation_statement must be a string"):
        check_row(
            {**row, "documentation_statement": ["x"]}, RowLimits.from_env({"HARVEST_ROW_MAX_STATEMENT_CHARS": "100000"})
        )


@pytest.mark.parametrize(
    "patch, why",
    [
        ("--- a/models\n+++ b/models\n@@ -1 +1 @@\n-x\n+y\n", "is a folder"),
        ("--- a/models/a\x00b.sql\n+++ b/models/a\x00b.sql\n@@ -0,0 +1 @@\n+select 1\n", "NUL"),
        ("--- a/.git/config\n+++ b/.git/config\n@@ -0,0 +1 @@\n+[core]\n", ".git"),
    ],
    ids=["folder-target", "nul-path", "git-folder"],
)
def test_a_broken_patch_that_cannot_apply_is_one_line(
    dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, patch: str, why: str
) -> None:
    folder, mirror, packages, ids = dataset
    copy = _rewrite(folder, tmp_path / "ds", lambda row: row.__setitem__("broken_patch", patch), ids[0])
    _refused_here(monkeypatch, tmp_path, copy, ids[0], mirror, packages, why)
    assert not (tmp_path / "out").exists()


def test_a_local_package_that_leaves_the_repository_is_refused(
    dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, mirror, packages, ids = dataset
    host = _canary_folder(tmp_path)

    def change(row: dict[str, Any]) -> None:
        row["packages"][0]["source"] = "local:" + "../" * 30 + str(host).lstrip("/")

    copy = _rewrite(folder, tmp_path / "ds", change, ids[0])
    _refused_here(monkeypatch, tmp_path, copy, ids[0], mirror, packages, "outside the repository")
    _untouched(host)


def test_rows_used_are_the_bytes_just_verified(dataset, tmp_path: Path) -> None:
    """A parquet file rewritten in place with the same size and mtime: the rows used are the new bytes (the
    ``datasets`` cache answered with the old ones), and without a re-hashed manifest they are refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dbt_harvest.corpora.errors import DatasetBuildError
    from dbt_harvest.corpora.materialize import MaterializeError, dataset_ref, load_rows

    folder, _, _, ids = dataset
    copy = tmp_path / "ds"
    shutil.copytree(folder, copy)
    for path in copy.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
    first = {r["instance_id"]: r for r in load_rows(dataset_ref(str(copy)), "dev")["dev"]}
    (rel,) = [r for r in json.loads((copy / "build.json").read_text())["files"] if r.startswith("data/dev-")]
    parquet = copy / rel
    before = parquet.stat()
    table = pq.read_table(parquet)
    rows = table.to_pylist()
    old = rows[0]["problem_statement"]
    rows[0]["problem_statement"] = "Z" * len(old)  # same length: with luck the same file size
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), parquet)
    os.utime(parquet, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises((MaterializeError, DatasetBuildError), match="changed since the build"):
        load_rows(dataset_ref(str(copy)), "dev")
    manifest = json.loads((copy / "build.json").read_text())
    manifest["files"][rel] = hashlib.sha256(parquet.read_bytes()).hexdigest()
    (copy / "build.json").write_text(json.dumps(manifest, indent=1))
    again = {r["instance_id"]: r for r in load_rows(dataset_ref(str(copy)), "dev")["dev"]}
    assert (
        again[rows[0]["instance_id"]]["problem_statement"]
        == "Z" * len(old)
        != first[rows[0]["instance_id"]]["problem_statement"]
    )


def test_score_follows_no_link_in_a_scored_workspace(dataset, tmp_path: Path) -> None:
    folder, mirror, packages, ids = dataset
    done = _materialize(tmp_path, folder, ids[0], mirror, packages)
    assert done.returncode == 0, done.stderr[-2000:]
    host = _canary_folder(tmp_path)
    project = tmp_path / "out" / "project"
    (project / "dbt_project.yml").unlink()
    os.symlink(host / "dbt_project.yml", project / "dbt_project.yml")
    scored = _run(tmp_path, "score", "--task", f"{folder}:{ids[0]}", "--workspace", str(tmp_path / "out"))
    _refused(scored, "is a link")
    _untouched(host)
