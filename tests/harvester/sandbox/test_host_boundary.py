"""The boundary between the sandboxed child and the HOST code that reads what it left behind (issue 14).

The sandbox itself holds (tests/sandbox/test_attacks.py); these attacks aim past it: project code plants
symbolic links in its workspace after its steps are done (``attacks/tamper``), fills RAM outside every
bound (``attacks/ram_fill``), reads the interpreter's installation folder (``attacks/read_prefix``), or
runs where Python lives under /tmp. Each test checks that the attack fails AND that a host victim (a
canary file or folder outside every workspace) is untouched: same bytes, same mtime, still there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sandbox_support import ATTACK_LIMITS, ATTACKS, CLOCK, SECRET, make_workspace

from dbt_harvest.core.errors import GoldError, SandboxError
from dbt_harvest.harvester.sandbox import DbtStep, QueryStep, run_steps


class Victim:
    """A host folder outside every workspace: its files' bytes and mtimes must never change."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "manifest.json").write_text(json.dumps({"nodes": {}, "secret": SECRET}))
        (folder / "agent.log").write_text(f"the host's own log {SECRET}\n")
        (folder / "target").mkdir()
        (folder / "target" / "keep.txt").write_text(SECRET)
        self.before = self.state()

    def state(self) -> dict[str, tuple[bytes, int]]:
        found = {}
        for path in sorted(self.folder.rglob("*")):
            if path.is_file():
                found[str(path.relative_to(self.folder))] = (path.read_bytes(), path.stat().st_mtime_ns)
        return found

    def untouched(self) -> bool:
        return self.state() == self.before


def tamper_workspace(tmp_path: Path, plan: list[tuple[str, str]]) -> Path:
    """The tamper attack project, its TAMPER list filled in."""
    workspace = make_workspace(tmp_path, ATTACKS / "tamper", "attack")
    model = workspace / "models" / "tamper.py"
    model.write_text(model.read_text().replace("__TAMPER__", repr(plan)))
    return workspace


# -- class 1: host code must not follow links the child planted -------------------------------------------


def test_built_state_is_not_copied_through_links_planted_after_the_capture(
    bwrap: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dbt_harvest.harvester.build import build_workspace
    from dbt_harvest.harvester.state import install_state, state_dir

    victim = Victim(tmp_path / "victim")
    secret_db = tmp_path / "victim-secret.bin"
    secret_db.write_bytes(SECRET.encode() * 100)
    workspace = tamper_workspace(tmp_path, [("build.duckdb", str(secret_db)), ("target", str(victim.folder))])
    result = build_workspace(workspace, ".", "attack", "main", CLOCK, limits=ATTACK_LIMITS)
    assert result.models_ok, result.first_error
    assert os.path.islink(workspace / "build.duckdb") and os.path.islink(workspace / "target")  # the attack ran
    monkeypatch.setenv("HARVEST_HOME", str(tmp_path / "home"))
    with pytest.raises(GoldError, match="symbolic link"):
        install_state("attack__tamper@000000000000", workspace, ".")
    kept = state_dir("attack__tamper@000000000000")
    for path in kept.rglob("*") if kept.exists() else []:
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), f"{path} holds a host file"
    assert victim.untouched() and secret_db.read_bytes() == SECRET.encode() * 100
    # the capture left the workspace as the host's own copy, made before the links appeared
    assert result.gold_file is not None and not result.gold_file.is_relative_to(workspace)


def test_logs_in_the_workspace_are_never_written_through_a_planted_link(bwrap: None, tmp_path: Path) -> None:
    """The eval environment keeps its log at .harvest_logs/agent.log in the workspace."""
    victim = Victim(tmp_path / "victim")
    workspace = tamper_workspace(tmp_path, [(".harvest_logs", str(victim.folder))])
    log = workspace / ".harvest_logs" / "agent.log"
    step = DbtStep(("run", "--select", "tamper"))
    first = run_steps(workspace, ".", [step], clock=CLOCK, limits=ATTACK_LIMITS, log_path=log)
    assert first.ok, first.first_error
    assert os.path.islink(workspace / ".harvest_logs")  # the attack ran
    second = run_steps(
        workspace, ".", [DbtStep(("run", "--select", "orders"))], clock=CLOCK, limits=ATTACK_LIMITS, log_path=log
    )
    assert second.ok, second.first_error
    assert victim.untouched(), "the host truncated or appended to a file outside the workspace"
    assert not os.path.islink(workspace / ".harvest_logs") and "orders" in log.read_text()


def test_submit_never_deletes_through_a_project_folder_swapped_for_a_link(tmp_path: Path) -> None:
    """grading._clean_build_state removes the agent's target folder before the graded build."""
    from dbt_harvest.eval.env.grading import _clean_build_state
    from dbt_harvest.eval.env.policy import PathPolicy
    from dbt_harvest.eval.env.workspace import TaskWorkspace

    victim = Victim(tmp_path / "victim")
    root = tmp_path / "ws"
    (root / "integration_tests").mkdir(parents=True)
    (root / "build.duckdb").write_bytes(b"agent state")
    # what a Python model of the project did: its own folder is now a link to a host folder
    shutil.rmtree(root / "integration_tests")
    os.symlink(victim.folder, root / "integration_tests")
    ws = TaskWorkspace(
        root=root,
        project_dir="integration_tests",
        profile="p",
        schema="main",
        clock=CLOCK,
        policy=PathPolicy(root=root, writable=()),
    )
    with pytest.raises(SandboxError, match="symbolic link"):
        _clean_build_state(ws)
    assert victim.untouched() and (victim.folder / "target" / "keep.txt").exists()


# -- class 4: every writable place inside is bounded -------------------------------------------------------


def test_dev_shm_root_and_dev_cannot_hold_more_than_their_bounds(bwrap: None, tmp_path: Path) -> None:
    host_shm = set(os.listdir("/dev/shm"))
    workspace = make_workspace(tmp_path, ATTACKS / "ram_fill", "attack")
    run = run_steps(
        workspace,
        ".",
        [
            DbtStep(("run",)),
            *(QueryStep("build.duckdb", f"select mib, reason from fill_{w}") for w in ("dev_shm", "root", "dev")),
        ],
        clock=CLOCK,
        limits=ATTACK_LIMITS,
        stop_on_failure=False,
    )
    assert run.steps[0].ok, run.steps[0].first_error
    (shm,), (root,), (dev,) = (step.detail["rows"] for step in run.steps[1:])
    print(
        f"\n[figure] written before refused: /dev/shm {shm[0]} MiB ({shm[1]}), / {root[0]} MiB ({root[1]}), "
        f"/dev {dev[0]} MiB ({dev[1]})"
    )
    assert shm[0] <= 4 and "No space left" in shm[1]  # Limits.shm_bytes: 4 MiB of the 1536 attempted
    assert root[0] == 0 and "Read-only file system" in root[1]
    assert dev[0] == 0 and "Read-only file system" in dev[1]
    assert not [name for name in set(os.listdir("/dev/shm")) - host_shm if "harvest-fill" in name]


# -- class 5: only the interpreter's own folders are visible -------------------------------------------------


def test_files_beside_the_interpreter_are_not_visible(bwrap: None, tmp_path: Path) -> None:
    prefix = Path(os.path.realpath(sys.base_prefix))
    canary = prefix / f"harvest-canary-{uuid.uuid4().hex}.txt"
    try:
        canary.write_text(SECRET)
    except OSError:
        pytest.skip(f"cannot write a canary into the interpreter's folder {prefix}")
    try:
        workspace = make_workspace(tmp_path, ATTACKS / "read_prefix", "attack")
        run = run_steps(
            workspace,
            ".",
            [
                DbtStep(("run", "--vars", json.dumps({"canary": str(canary)}))),
                QueryStep("build.duckdb", "select seen from read_prefix"),
            ],
            clock=CLOCK,
            limits=ATTACK_LIMITS,
        )
        assert run.ok, run.first_error
        assert run.steps[1].detail["rows"] == [["refused: FileNotFoundError"]]
        assert canary.read_text() == SECRET
    finally:
        canary.unlink()


def test_binds_are_minimal_and_a_whole_prefix_is_refused() -> None:
    from dbt_harvest.harvester.sandbox.command import python_binds, refuse_sensitive_binds

    binds = python_binds()
    prefixes = {Path(os.path.realpath(p)) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    for source in binds.sources:
        assert source not in prefixes, f"{source} is a whole interpreter prefix"
    assert Path(os.path.realpath(sys.executable)) in binds.files or any(
        d in Path(os.path.realpath(sys.executable)).parents for d in binds.dirs
    )
    system = Path("/usr")
    for prefix in prefixes:
        if system not in prefix.parents:
            with pytest.raises(SandboxError, match="whole Python prefix"):
                refuse_sensitive_binds([prefix])


def test_the_checkout_is_forbidden_but_an_installed_package_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a checkout, the repository (pins, fixtures, a home with gold) is never bound or used as a
    workspace. Installed from a wheel, the package is public code in the site-packages folder that also
    holds dbt: forbidding it would refuse every sandboxed build of a pip-installed dbt-harvest."""
    from dbt_harvest.core import source
    from dbt_harvest.harvester.sandbox import command

    checkout = Path(__file__).resolve().parents[3]  # tests/harvester/sandbox/ -> the checkout
    assert source.source_checkout() == checkout
    assert checkout in command.forbidden_paths()
    with pytest.raises(SandboxError, match="this repository"):
        command.refuse_sensitive_binds([checkout.parent])

    site = tmp_path / "lib" / "python3.11" / "site-packages"
    installed = site / "dbt_harvest" / "core" / "source.py"
    installed.parent.mkdir(parents=True)
    (site / "dbt_harvest" / "__init__.py").write_text("")
    shutil.copy2(source.__file__, installed)
    monkeypatch.setattr(source, "__file__", str(installed))
    assert source.source_checkout() is None
    assert not any(site == bad or site in bad.parents for bad in command.forbidden_paths())
    command.refuse_sensitive_binds([site])


# -- class 8: Python installed under /tmp -------------------------------------------------------------------

VENV_RUN = """
import json, sys
from pathlib import Path
from dbt_harvest.harvester.sandbox import DbtStep, QueryStep, run_steps, write_profile
from dbt_harvest.harvester.sandbox.limits import Limits
workspace = Path(sys.argv[1])
run = run_steps(workspace, ".", [DbtStep(("run", "--select", "orders")), QueryStep("build.duckdb", "select count(*) from orders")],
                clock="2024-06-30", limits=Limits(wall_s=240))
print(json.dumps({"ok": run.ok, "error": run.first_error, "exe": sys.executable}))
"""


def _python_under_tmp() -> tuple[Path, Path | None]:
    """A virtualenv's python under /tmp that has dbt-duckdb, and the folder to remove afterwards (None: the
    test run's own). CI's and most containers' virtualenvs already live under /tmp: then the test run's own
    interpreter is that case. Elsewhere a fresh ``--system-site-packages`` venv is made under /tmp; it sees
    the BASE interpreter's packages, so the test skips when the base has no dbt-duckdb."""
    own = Path(sys.prefix)
    if sys.prefix != sys.base_prefix and Path("/tmp") in own.parents:
        return Path(sys.executable), None
    venv = Path("/tmp") / f"harvest-venv-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True, timeout=120
    )
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import dbt.adapters.duckdb"], capture_output=True, timeout=120
    )
    if probe.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        pytest.skip("the base interpreter has no dbt-duckdb: a --system-site-packages venv of it cannot build")
    return venv / "bin" / "python", venv


def test_a_virtualenv_under_tmp_runs_sandboxed_builds(bwrap: None, tmp_path: Path) -> None:
    python, made = _python_under_tmp()
    try:
        workspace = tamper_workspace(tmp_path, [])
        env = {**os.environ, "HARVEST_HOME": str(tmp_path / "home")}
        done = subprocess.run(
            [str(python), "-c", VENV_RUN, str(workspace)],
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        assert summary["exe"].startswith("/tmp/")
        assert Path(summary["exe"]).parent.parent == (made or Path(sys.prefix))
        assert summary["ok"], summary["error"]
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


# -- the rule itself ----------------------------------------------------------------------------------------


def test_safe_fs_never_follows_a_link_and_reports_how_it_resolves(tmp_path: Path) -> None:
    from dbt_harvest.harvester.sandbox import safe_fs

    victim = Victim(tmp_path / "victim")
    root = tmp_path / "ws"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.txt").write_text("inside")
    os.symlink(victim.folder, root / "link")
    os.symlink(victim.folder / "agent.log", root / "a" / "file_link")
    os.mkfifo(root / "fifo")
    print(f"\n[figure] safe_fs resolves with: {safe_fs.method()}")
    assert safe_fs.read_text(root, "a/f.txt") == "inside"
    for rel in ("link/agent.log", "a/file_link", "fifo", "../victim/agent.log", "/etc/hostname", "a/../link"):
        with pytest.raises(safe_fs.UnsafePathError):
            safe_fs.read_bytes(root, rel)
    with pytest.raises(safe_fs.UnsafePathError):
        safe_fs.write_text(root, "link/agent.log", "overwritten")
    with pytest.raises(safe_fs.UnsafePathError):
        safe_fs.copy_out(root, "a/file_link", tmp_path / "copy", max_bytes=1 << 20)
    with pytest.raises(safe_fs.UnsafePathError, match="over the bound"):
        safe_fs.read_bytes(root, "a/f.txt", max_bytes=3)
    assert [rel for rel, _ in safe_fs.walk(root)] == ["a", "a/f.txt", "a/file_link", "fifo", "link"]
    safe_fs.remove(root, "link")
    safe_fs.rmtree(root)
    assert not root.exists() and victim.untouched()


def test_the_fallback_walk_holds_the_same_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbt_harvest.harvester.sandbox import safe_fs

    monkeypatch.setenv("HARVEST_NO_OPENAT2", "1")
    safe_fs.openat2_available.cache_clear()
    try:
        assert safe_fs.method() == "O_NOFOLLOW walk"
        test_safe_fs_never_follows_a_link_and_reports_how_it_resolves(tmp_path)
    finally:
        monkeypatch.delenv("HARVEST_NO_OPENAT2")
        safe_fs.openat2_available.cache_clear()
