"""Pin toolchains (issue 61): a project that refuses today's dbt is pinned, minted and verified on dbt 1.5
in a virtualenv of its own, made once per home and shared, made again from the pin's lock in another home.

The toolchain is made for real by pip, offline, from a wheelhouse of dbt 1.5's packages that CI downloads
first (``harvest toolchain wheels 1.5 DIR``, named by ``HARVEST_TEST_WHEELHOUSE``); without one the tests
that build are skipped here and fail under CI. Every build is sandboxed, as for any untrusted project.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.core.errors import PinError, ToolchainError
from dbt_harvest.core.pin import read_pin
from dbt_harvest.core.toolchain import Toolchain
from dbt_harvest.harvester.toolchain import choose, installed_release, release_named
from dbt_harvest.harvester.toolchain.choice import requirements
from dbt_harvest.harvester.toolchain.releases import TOOLCHAIN_RELEASES
from tests.fixtures import LEGACY_DBT, fixture_dir, fixture_repo

WHEELHOUSE = os.environ.get("HARVEST_TEST_WHEELHOUSE", "")


def _wheelhouse() -> Path:
    path = Path(WHEELHOUSE) if WHEELHOUSE else None
    if path is None or not path.is_dir() or not any(path.glob("dbt_core-1.5.*.whl")):
        if os.environ.get("CI"):
            pytest.fail(
                "CI must download dbt 1.5's wheels first: harvest toolchain wheels 1.5 $HARVEST_TEST_WHEELHOUSE"
            )
        pytest.skip("no wheelhouse of dbt 1.5 (HARVEST_TEST_WHEELHOUSE): `harvest toolchain wheels 1.5 DIR`")
    return path


def _env(root: Path, toolchains: Path | None = None, wheels: Path | None = None) -> dict[str, str]:
    """A home, pins and toolchains folder under ``root``; pip offline, reading only ``wheels``."""
    return {
        "HARVEST_HOME": str(root / "home"),
        "HARVEST_PINS": str(root / "pins"),
        "HARVEST_TOOLCHAINS": str(toolchains or root / "toolchains"),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels or root / "no-wheels"),
        "PIP_CONFIG_FILE": os.devnull,
        "HARVEST_DBT_RELEASES": "all",  # the session allows only the installed dbt (tests/conftest.py)
    }


def _run(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


# ------------------------------------------------------------------ the record and the choice (no pip)


def _toolchain(**change: object) -> Toolchain:
    fields: dict[str, object] = {
        "dbt_core": "1.7.20",
        "dbt_duckdb": "1.7.5",
        "duckdb": "1.4.5",
        "lock": ("agate==1.7.1", "dbt-core==1.7.20", "dbt-duckdb==1.7.5", "duckdb==1.4.5"),
    }
    fields.update(change)
    return Toolchain(**fields)  # type: ignore[arg-type]


def test_toolchain_record_refuses_what_does_not_hold() -> None:
    good = _toolchain()
    assert (
        good.name.startswith("dbt-core-1.7.20_dbt-duckdb-1.7.5_duckdb-1.4.5_") and len(good.name.split("_")[-1]) == 12
    )
    with pytest.raises(PinError, match="exact version"):
        _toolchain(dbt_core="1.7")
    with pytest.raises(PinError, match="sorted"):
        _toolchain(lock=("duckdb==1.4.5", "dbt-core==1.7.20", "dbt-duckdb==1.7.5"))
    with pytest.raises(PinError, match="dbt-duckdb==1.7.4"):
        _toolchain(lock=("dbt-core==1.7.20", "dbt-duckdb==1.7.4", "duckdb==1.4.5"))
    with pytest.raises(PinError, match="name==version"):
        _toolchain(lock=("dbt-core>=1.7",))
    # a lock that changes one transitive package is another toolchain (another folder)
    assert _toolchain(lock=("agate==1.7.0", *good.lock[1:])).name != good.name


def test_release_chosen_from_require_dbt_version(tmp_path: Path) -> None:
    assert choose([]).installed  # nothing required: today's dbt
    assert choose([("the project", ">=1.0.0")]).installed
    assert choose([("the project", [">=1.6.0", "<1.8.0"])]).minor == "1.7"  # the newest that meets it
    # one string naming several ranges, as dbt reads it (a real project wrote '>=1.10.0,<2.0.0')
    assert choose([("the project", ">=1.6.0, <1.8.0")]).minor == "1.7"
    assert choose([("the project", ">=1.10.0,<2.0.0")]).installed
    with pytest.raises(ToolchainError, match="not a version range dbt reads"):
        choose([("the project", ">=1.6.0,banana")])
    assert choose([("the project", "<1.8.0"), ("package old_utils", [">=1.3.0", "<1.6.0"])]).minor == "1.5"
    with pytest.raises(ToolchainError, match=r"package a requires '<1.2.0'"):
        choose([("package a", "<1.2.0")])
    assert release_named("1.7.20") == release_named("1.7") and release_named("1.11").installed
    with pytest.raises(ToolchainError, match="not a supported toolchain"):
        release_named("1.4")
    # every toolchain is older than the installed dbt, and none brings a DuckDB newer than this process's
    # (which must read every database a toolchain writes) or older than 1.4 (the lockdown's floor)
    mine = tuple(int(x) for x in installed_release().duckdb.split(".")[:2])
    for release in TOOLCHAIN_RELEASES:
        assert (1, 4) <= tuple(int(x) for x in release.duckdb.split(".")[:2]) <= mine
    # the project's own requirement and the packages it vendors
    project = tmp_path / "p"
    shutil.copytree(fixture_dir("legacy_kennel"), project)
    (project / "dbt_packages" / "old_utils").mkdir(parents=True)
    (project / "dbt_packages" / "old_utils" / "dbt_project.yml").write_text(
        "name: old_utils\nrequire-dbt-version: '>=1.6.0'\n"
    )
    assert requirements(project) == [("the project", [">=1.5.0", "<1.6.0"]), ("package old_utils", ">=1.6.0")]


def test_the_releases_add_may_try_are_named_by_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbt_harvest.harvester.toolchain.releases import walk_releases

    monkeypatch.setenv("HARVEST_DBT_RELEASES", "all")
    assert [r.minor for r in walk_releases()][1:] == [r.minor for r in TOOLCHAIN_RELEASES]
    monkeypatch.setenv("HARVEST_DBT_RELEASES", "1.7, 1.11")
    assert [r.minor for r in walk_releases()] == [installed_release().minor, "1.7"]
    monkeypatch.setenv("HARVEST_DBT_RELEASES", "1.3")
    with pytest.raises(ToolchainError, match="not a supported toolchain"):
        walk_releases()
    # the installed dbt alone: a project that refuses it is refused in one line, no toolchain made
    env = {**_env(tmp_path), "HARVEST_DBT_RELEASES": installed_release().minor}
    repo = fixture_repo("legacy_kennel", tmp_path / "repo")
    code, _, err = _run(env, "add", f"{repo.path}@{repo.head}", "--name", "acme/legacy_kennel")
    assert code == 1 and "no supported dbt" in err and "<1.6.0" in err, err
    assert not (tmp_path / "toolchains").exists() or not any((tmp_path / "toolchains").iterdir())


def test_cli_usage_and_offline_refusal(tmp_path: Path) -> None:
    env = _env(tmp_path)
    code, _, err = _run(env, "toolchain", "make", "0.9")
    assert code == 2 and "not a supported toolchain" in err
    code, _, err = _run(env, "add", f"{tmp_path}@abc", "--dbt-version", "2.0")
    assert code == 2 and "--dbt-version" in err
    # offline, no package to be had: one line naming the package and what to do; no half toolchain left
    code, out, err = _run(env, "toolchain", "make", "1.8")
    assert code == 1 and out == ""
    lines = [line for line in err.splitlines() if not line.startswith("making ")]
    assert len(lines) == 1 and lines[0].startswith("error: cannot make toolchain dbt 1.8"), err
    assert "dbt-core==1.8.10" in lines[0] and "harvest toolchain wheels" in lines[0]
    assert not any((tmp_path / "toolchains").iterdir())
    code, out, _ = _run(env, "toolchain", "list", "--json")
    listed = json.loads(out)
    assert code == 0 and listed["made"] == [] and listed["releases"][0]["installed"]


# ------------------------------------------------------------------ real toolchains, real builds


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """legacy_kennel pinned by `harvest add` on its own (dbt 1.5 made offline from the wheelhouse)."""
    wheels = _wheelhouse()
    root = tmp_path_factory.mktemp("legacy")
    env = _env(root, wheels=wheels)
    repo = fixture_repo("legacy_kennel", root / "repo")
    code, out, err = _run(env, "add", f"{repo.path}@{repo.head}", "--name", "acme/legacy_kennel", "--json")
    assert code == 0, err
    return {"root": root, "env": env, "repo": repo, "summary": json.loads(out), "wheels": wheels}


def test_a_project_for_an_older_dbt_is_pinned_on_its_toolchain(legacy: dict) -> None:  # type: ignore[type-arg]
    summary, env = legacy["summary"], legacy["env"]
    chain = summary["toolchain"]
    assert chain is not None and chain["dbt_core"] == release_named(LEGACY_DBT).dbt_core
    assert summary["versions"]["dbt-core"] == chain["dbt_core"] and summary["versions"]["duckdb"] == chain["duckdb"]
    pin = read_pin(Path(summary["pin"]))
    assert pin.toolchain is not None and f"dbt-core=={chain['dbt_core']}" in pin.toolchain.lock
    assert len(pin.toolchain.lock) > 10  # every package of the virtualenv, not only the three
    assert {t.name for t in pin.gradable_tables} == {"main.dog_revenue", "main.monthly_occupancy"}
    code, out, _ = _run(env, "show", pin.id)
    assert code == 0 and f"toolchain dbt-core {chain['dbt_core']}" in " ".join(out.split())
    # the installed dbt refuses the project (require-dbt-version), so the toolchain is what builds it
    repo = legacy["repo"]
    code, _, err = _run(env, "add", f"{repo.path}@{repo.head}", "--name", "acme/other", "--dbt-version", "1.11")
    assert code == 1 and "1.11" in err and "require" in err.lower()


def test_a_second_pin_shares_the_toolchain(legacy: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    env = legacy["env"]
    folders = sorted(Path(env["HARVEST_TOOLCHAINS"]).iterdir())
    assert len(folders) == 1
    made_at = (folders[0] / "toolchain.json").stat().st_mtime_ns
    repo = fixture_repo("legacy_orchard", tmp_path / "orchard")
    code, out, err = _run(env, "add", f"{repo.path}@{repo.head}", "--name", "acme/legacy_orchard", "--json")
    assert code == 0, err
    assert json.loads(out)["toolchain"]["name"] == folders[0].name
    assert sorted(Path(env["HARVEST_TOOLCHAINS"]).iterdir()) == folders
    assert (folders[0] / "toolchain.json").stat().st_mtime_ns == made_at


def _minted(legacy: dict) -> None:  # type: ignore[type-arg]
    """The legacy pin's split reserved (train) and its tasks minted, once per module."""
    env, pin_id = legacy["env"], legacy["summary"]["id"]
    if legacy.get("minted"):
        return
    assert _run(env, "split", "assign", "--test", "0", "--dev", "0")[0] == 0
    code, out, err = _run(env, "mint", pin_id, "--json")
    assert code == 0, err
    legacy["minted"] = json.loads(out)


def test_mint_and_verify_on_the_toolchain(legacy: dict) -> None:  # type: ignore[type-arg]
    env = legacy["env"]
    _minted(legacy)
    kept = legacy["minted"]
    tasks = sorted((Path(env["HARVEST_HOME"]) / "tasks").rglob("*.json"))
    assert tasks, kept
    record = json.loads(tasks[0].read_text())
    assert record["versions"]["dbt-core"] == release_named(LEGACY_DBT).dbt_core
    code, out, err = _run(env, "tasks", "verify", "--all", "--json")
    assert code == 0, err
    verified = json.loads(out)["summary"]
    assert verified["tasks"] == verified["ok"] == len(tasks)
    assert verified["checks"]["repair_passes"]["ok"] == verified["checks"]["wrong_repair"]["ok"] == len(tasks)


def test_the_lock_reproduces_in_another_home(legacy: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    """A fresh home (no toolchain made) rebuilds the pin: its toolchain is made from the pin's lock, exactly,
    the gold comes out the same, and its tasks minted again match the task lock written in the first home."""
    summary = legacy["summary"]
    _minted(legacy)
    code, _, err = _run(legacy["env"], "corpus", "lock", "--pin", summary["id"])
    assert code == 0, err
    env = _env(tmp_path, wheels=legacy["wheels"])
    shutil.copytree(Path(summary["pin"]).parent, tmp_path / "pins")
    repo = legacy["repo"]
    code, out, err = _run(env, "add", f"{repo.path}@{repo.head}", "--name", "acme/legacy_kennel", "--rebuild", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert again["status"] == "rebuilt" and again["gold_sha256"] == summary["gold_sha256"], again["drift"]
    assert again["toolchain"] == summary["toolchain"]
    made = sorted((tmp_path / "toolchains").iterdir())
    assert [p.name for p in made] == [summary["toolchain"]["name"]]
    code, _, err = _run(env, "mint", summary["id"])
    assert code == 0, err
    code, out, err = _run(env, "corpus", "lock", "--verify", "--pin", summary["id"], "--json")
    assert code == 0 and json.loads(out)["same"], out + err
    # a lock naming a version the wheelhouse lacks is refused, naming it, with nothing made
    pin = read_pin(Path(summary["pin"]))
    assert pin.toolchain is not None
    agate = next(line for line in pin.toolchain.lock if line.startswith("agate=="))
    changed = tuple(sorted({*pin.toolchain.lock} - {agate} | {"agate==1.6.3"}))
    other = Toolchain(pin.toolchain.dbt_core, pin.toolchain.dbt_duckdb, pin.toolchain.duckdb, changed)
    from dbt_harvest.harvester.toolchain import ensure_toolchain

    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        with pytest.raises(ToolchainError, match="agate==1.6.3"):
            ensure_toolchain(other)
    assert [p.name for p in sorted((tmp_path / "toolchains").iterdir())] == [summary["toolchain"]["name"]]
