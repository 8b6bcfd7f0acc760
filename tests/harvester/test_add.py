"""`harvest add` end to end through the CLI: real git repositories, real sandboxed dbt-duckdb builds,
real DuckDB gold. Every bad input exits non-zero with one line and leaves nothing under pins/."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from tests.fixtures import (
    BUILD_FAILS_MARKER,
    CLOCK_NEWEST_SEED_DATE,
    FIVETRAN_SCHEMA,
    LOCKED_VERSIONS,
    MISSING_PACKAGE,
    example_mirror,
    fixture_repo,
)


def _run(tmp: Path, *args: str) -> tuple[int, str, str]:
    env = {"HARVEST_HOME": str(tmp / "home"), "HARVEST_PINS": str(tmp / "pins")}
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def _error_only(err: str) -> str:
    """stderr less the piped progress heartbeat of a slow add (`harvesting …… (10s)`): what remains must
    be exactly the one `error:` line."""
    return "".join(line for line in err.splitlines(keepends=True) if not line.startswith("harvesting "))


def _pins(tmp: Path) -> list[Path]:
    folder = tmp / "pins"
    return sorted(folder.glob("*.toml")) if folder.is_dir() else []


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return example_mirror(tmp_path_factory.mktemp("mirror") / "mirror")


@pytest.fixture(scope="module")
def clock_added(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The clock fixture pinned once by `harvest add` (a short sha, expanded), read by the rebuild tests:
    the folder holding its home and pins, and the add's JSON summary."""
    root = tmp_path_factory.mktemp("clock-added")
    repo = fixture_repo("clock", root / "repo")
    code, out, err = _run(root, "add", f"{repo.path}@{repo.head[:10]}", "--json")
    assert code == 0, err
    return root, json.loads(out)


def _clock_copy(clock_added: tuple[Path, dict], tmp: Path):  # type: ignore[no-untyped-def]
    """A test's own copy of the pinned clock fixture (home, pins, and the repository at the same commit)."""
    import shutil

    root, _ = clock_added
    shutil.copytree(root / "home", tmp / "home", symlinks=True)
    shutil.copytree(root / "pins", tmp / "pins")
    return fixture_repo("clock", tmp / "repo")


def test_example_pin_summary_list_show_and_noop_readd(example_harvest) -> None:  # type: ignore[no-untyped-def]
    pin = example_harvest.pin
    assert example_harvest.pin_path.name == f"{pin.id}.toml" and pin.id.startswith("local__shop_analytics@")
    assert {p.name: p.version for p in pin.packages} == {"shop_utils": "0.3.1", "shop_calendar": "0.2.1"}
    assert all(len(p.commit) == 40 for p in pin.packages)
    assert pin.tables and all(t.deterministic and not t.empty for t in pin.tables)
    assert pin.clock == "2024-12-28 00:00:00" and len(pin.tree) == 40
    for key in ("python", "dbt-core", "dbt-duckdb", "duckdb", "sqlglot", "harvester"):
        assert pin.versions[key]
    with example_harvest.env():
        from dbt_harvest.harvester.gold import gold_path

        gold = gold_path(pin.gold_sha256)
    con = duckdb.connect(str(gold), read_only=True)
    rows = dict(con.execute("select schema_name || '.' || table_name, estimated_size from duckdb_tables()").fetchall())
    con.close()
    assert set(rows) == {t.name for t in pin.tables}

    tmp = example_harvest.home.parent
    code, out, _ = _run(tmp, "show", pin.id, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["commit"] == pin.commit and shown["gold_sha256"] == pin.gold_sha256
    assert {t["name"] for t in shown["tables"]} == {t.name for t in pin.tables}
    code, out, _ = _run(tmp, "list", "--json")
    assert code == 0 and [p["id"] for p in json.loads(out)["pins"]] == [pin.id]
    before = example_harvest.pin_path.read_bytes()
    code, out, _ = _run(
        tmp, "add", example_harvest.example.spec, "--package-mirror", str(example_harvest.example.mirror)
    )
    assert code == 0 and "already pinned" in out
    assert example_harvest.pin_path.read_bytes() == before


def test_a_tampered_gold_file_is_an_error_not_a_zero(example_harvest, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from dbt_harvest.core.errors import GoldError

    home = tmp_path / "home"
    shutil.copytree(example_harvest.home / "gold", home / "gold")
    sha = example_harvest.pin.gold_sha256
    with (home / "gold" / f"{sha}.duckdb").open("r+b") as handle:
        handle.seek(5000)
        handle.write(b"\x00tampered")
    from tests.conftest import use_env

    with use_env(home, tmp_path / "pins"):
        from dbt_harvest.harvester.gold import gold_path

        with pytest.raises(GoldError, match="corrupted"):
            gold_path(sha)


def test_nondeterministic_tables_are_marked(tmp_path: Path) -> None:
    repo = fixture_repo("nondeterministic", tmp_path / "repo")
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--json")
    assert code == 0, err
    tables = {t["name"].split(".")[-1]: t for t in json.loads(out)["tables"]}
    # random() changes one column on every build: that column is never graded, the table's others are
    # (a third build, under the first's database name, also differed: chance, not the database's name).
    # The builder's home folder changes with where the build ran (the second build runs in another folder,
    # as another home): the third build, in the first's place, agrees with the first on it
    sampled = tables["sampled_readings"]
    assert sampled["unstable_columns"] == ["audit_weight", "built_from"] and sampled["database_columns"] == [
        "built_from"
    ]
    assert sampled["deterministic"] is True and sampled["gradable"] is True
    assert all(
        t["deterministic"] and not t["unstable_columns"] for name, t in tables.items() if name != "sampled_readings"
    )


def test_the_clock_is_pinned_after_the_newest_seed_date(clock_added) -> None:  # type: ignore[no-untyped-def]
    from datetime import date, timedelta

    root, summary = clock_added
    head = fixture_repo("clock", root / "again").head
    assert summary["commit"] == head  # the short sha was expanded and recorded in full, in the spec too
    assert summary["spec"] == f"local://local/gym_memberships@{head}"
    today = date.fromisoformat(CLOCK_NEWEST_SEED_DATE) + timedelta(days=1)
    assert summary["clock"] == f"{today} 00:00:00"
    gold = root / "home" / "gold" / f"{summary['gold_sha256']}.duckdb"
    con = duckdb.connect(str(gold), read_only=True)
    joined, days = con.execute(
        "select joined_on, days_as_member from main.membership_age order by member_id limit 1"
    ).fetchone()
    con.close()
    assert days == (today - joined).days  # current_date inside the build was the pinned date


def test_a_rebuild_reproduces_the_gold_name(clock_added, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The gold's name (its content digest) names it in the pin and in every task: building the same commit
    again (here `add --rebuild`; on another machine, a fresh add from a mirror) must give the same name, or
    every committed pin and task lock would drift on each rebuild."""
    from dbt_harvest.harvester.gold_digest import content_digest

    repo = _clock_copy(clock_added, tmp_path)
    first = clock_added[1]["gold_sha256"]
    assert content_digest(tmp_path / "home" / "gold" / f"{first}.duckdb") == first
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--rebuild", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert again["gold_sha256"] == first, again.get("drift")
    assert sorted(p.name for p in (tmp_path / "home" / "gold").glob("*.duckdb")) == [f"{first}.duckdb"]


def test_gold_of_long_text_rebuilds_to_the_same_pin_in_a_fresh_home(tmp_path: Path) -> None:
    """fivetran/dbt_facebook_ads' long creative JSON gave a gold file with other bytes on every rebuild
    (same rows, order and types). The gold is named by its content, so a fresh home rebuilding the
    committed pin gets the pin back byte for byte, with no drift. (This fixture's capture happens to be
    byte-stable too; multi-threaded writes of large tables are not, see gold_digest's tests.)"""
    from dbt_harvest.core import atomic

    repo = fixture_repo("ticket_notes", tmp_path / "repo")
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--json")
    assert code == 0, err
    name = json.loads(out)["gold_sha256"]
    (path,) = _pins(tmp_path)
    committed = path.read_bytes()
    first_bytes = atomic.sha256_file(tmp_path / "home" / "gold" / f"{name}.duckdb")
    (tmp_path / "home").rename(tmp_path / "first-home")  # a fresh home, the committed pins kept
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--rebuild", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert again["gold_sha256"] == name and again["drift"] == []
    assert path.read_bytes() == committed
    # named by content, not by either write's bytes
    assert name not in (first_bytes, atomic.sha256_file(tmp_path / "home" / "gold" / f"{name}.duckdb"))


def test_a_pin_named_by_its_gold_file_bytes_keeps_that_name_while_a_rebuild_reproduces_them(
    clock_added, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Pins made before content naming name their gold by the file's sha256: a rebuild that gives the same
    bytes keeps the pin (and so every task of it) byte for byte, its gold stored under the old name."""
    from dataclasses import replace

    from dbt_harvest.core import atomic
    from dbt_harvest.core.pin import read_pin, write_pin

    repo = _clock_copy(clock_added, tmp_path)
    (path,) = _pins(tmp_path)
    made = read_pin(path)
    stored = tmp_path / "home" / "gold" / f"{made.gold_sha256}.duckdb"
    by_bytes = atomic.sha256_file(stored)
    assert by_bytes != made.gold_sha256
    write_pin(replace(made, gold_sha256=by_bytes), tmp_path / "pins")
    committed = path.read_bytes()
    (tmp_path / "home").rename(tmp_path / "old-home")
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--rebuild", "--json")
    assert code == 0, err
    assert json.loads(out)["drift"] == [] and path.read_bytes() == committed
    assert (tmp_path / "home" / "gold" / f"{by_bytes}.duckdb").is_file()
    from tests.conftest import use_env

    with use_env(tmp_path / "home", tmp_path / "pins"):
        from dbt_harvest.harvester.gold import gold_path

        assert gold_path(by_bytes).name == f"{by_bytes}.duckdb"
    # --rename-gold moves such a pin to its content name (the migration of a pin whose bytes drift elsewhere)
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--rebuild", "--rename-gold", "--json")
    assert code == 0, err
    assert json.loads(out)["drift"] == [f"gold {by_bytes[:12]} -> {made.gold_sha256[:12]}"]
    assert read_pin(path).gold_sha256 == made.gold_sha256
    assert (tmp_path / "home" / "gold" / f"{made.gold_sha256}.duckdb").is_file()


def test_rename_gold_without_rebuild_is_a_usage_error(tmp_path: Path) -> None:
    repo = fixture_repo("clock", tmp_path / "repo")
    code, _, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--rename-gold")
    assert code == 2 and "--rebuild" in err and not _pins(tmp_path)


def test_a_rebuild_that_differs_only_in_tool_versions_keeps_the_committed_pin(clock_added, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A pin made under other tool versions (a corpus pinned before a dependency was re-pinned), rebuilt
    to the same gold and tables: the pin file is kept byte for byte, since every task record carries the
    pin's versions and the task lock hashes the records; the drift still names the versions."""
    from dataclasses import replace

    from dbt_harvest.core.pin import read_pin, write_pin

    repo = _clock_copy(clock_added, tmp_path)
    (path,) = _pins(tmp_path)
    made = read_pin(path)
    write_pin(replace(made, versions={**made.versions, "sqlglot": "0.0.1"}), tmp_path / "pins")
    committed = path.read_bytes()
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--rebuild", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert path.read_bytes() == committed and again["versions"]["sqlglot"] == "0.0.1"
    assert any("versions changed: sqlglot" in note and "keeps the versions" in note for note in again["drift"])


COMPAT_PATCH = """diff --git a/models/compat_marker.sql b/models/compat_marker.sql
new file mode 100644
--- /dev/null
+++ b/models/compat_marker.sql
@@ -0,0 +1 @@
+select 7 as patched_in
"""


def test_a_rebuild_keeps_the_compat_patch_the_pin_records(tmp_path: Path) -> None:
    """`add --rebuild` of a pin made with --compat-patch applies the stored patch again (a rebuild that
    dropped it built a different project, or failed to build one that needs its shim)."""
    repo = fixture_repo("clock", tmp_path / "repo")
    patch = tmp_path / "compat.diff"
    patch.write_text(COMPAT_PATCH)
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--compat-patch", str(patch), "--json")
    assert code == 0, err
    first = json.loads(out)
    assert first["compat_patch_sha256"] and any(t["name"] == "main.compat_marker" for t in first["tables"])
    patch.unlink()  # the rebuild must read the pin's stored copy, not the file given the first time
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--rebuild", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert again["compat_patch_sha256"] == first["compat_patch_sha256"]
    assert again["gold_sha256"] == first["gold_sha256"], again.get("drift")


LATE_SEED_PATCH = """diff --git a/seeds/late_visits.csv b/seeds/late_visits.csv
new file mode 100644
--- /dev/null
+++ b/seeds/late_visits.csv
@@ -0,0 +1,2 @@
+member_id,visited_on
+1,2025-01-15
"""


def test_a_compat_patch_that_moves_the_seed_dates_moves_the_clock_the_builds_run_at(tmp_path: Path) -> None:
    """The gold builds' child starts (at the clock of the seeds as committed) while packages are vendored
    and the patch applied; a patch that adds a later seed date must still give the day after it as the
    clock, and the builds must run at that clock, not at the one the child was started with."""
    repo = fixture_repo("clock", tmp_path / "repo")
    patch = tmp_path / "late.diff"
    patch.write_text(LATE_SEED_PATCH)
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--compat-patch", str(patch), "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["clock"] == "2025-01-16 00:00:00"
    gold = tmp_path / "home" / "gold" / f"{summary['gold_sha256']}.duckdb"
    con = duckdb.connect(str(gold), read_only=True)
    joined, days = con.execute(
        "select joined_on, days_as_member from main.membership_age order by member_id limit 1"
    ).fetchone()
    con.close()
    from datetime import date

    assert days == (date(2025, 1, 16) - joined).days
    log = next((tmp_path / "home" / "builds").rglob("builds.log")).read_text()
    assert log.count("[harvest sandbox] sandboxed=True ok=True") == 2  # both gold builds, one child


def test_a_package_repository_builds_its_integration_tests(tmp_path: Path) -> None:
    repo = fixture_repo("fivetran_style", tmp_path / "repo")
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["project_dir"] == "integration_tests"
    assert all(not t["empty"] for t in summary["tables"])
    # built in the target schema FIVETRAN_SCHEMA, captured in main where the scorer looks (harvest_names)
    assert summary["tables"] and all(t["name"].startswith("main.") for t in summary["tables"])
    assert not any(t["name"].startswith(FIVETRAN_SCHEMA) for t in summary["tables"])
    assert any(p["source"].startswith("local:") for p in summary["packages"])


def test_a_shipped_package_lock_is_honoured(tmp_path: Path, mirror: Path) -> None:
    repo = fixture_repo("with_lockfile", tmp_path / "repo")
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--package-mirror", str(mirror), "--json")
    assert code == 0, err
    versions = {p["name"]: p["version"].lstrip("v") for p in json.loads(out)["packages"]}
    assert versions == {k: v.lstrip("v") for k, v in LOCKED_VERSIONS.items()}


def test_a_rebuild_builds_with_the_pinned_packages_not_the_newest_in_range(tmp_path: Path) -> None:
    """A rebuild must build what the pin records. The project asks for shop_utils in [0.2.0, 1.0.0); pinned
    when the mirror held 0.2.0 at most, its rebuild from a mirror that has since gained 0.3.0 and 0.3.1 still
    vendors 0.2.0 (before, it resolved the range again, took 0.3.1, rewrote the pin and reported no drift).
    A mirror that no longer has the pinned version is one line naming the package, and the pin stays."""
    import shutil

    from dbt_harvest.harvester.gitrepos import make_git_repo, make_package_mirror
    from tests.fixtures import example_packages, fixture_dir

    source = tmp_path / "source"
    shutil.copytree(fixture_dir("with_lockfile"), source)
    (source / "package-lock.yml").unlink()  # the ranges decide, as in most projects
    repo = make_git_repo(source, tmp_path / "repo")
    packages = {hub: Path(folder) for hub, folder in example_packages().items()}

    def mirror(name: str, keep: set[str]) -> Path:
        return make_package_mirror(
            tmp_path / name,
            {hub: {tag.name: tag for tag in folder.iterdir() if tag.name in keep} for hub, folder in packages.items()},
        )

    then = mirror("then", {"0.1.0", "0.2.0", "v0.1.0", "v0.2.0"})
    now = mirror("now", {"0.1.0", "0.2.0", "0.3.0", "0.3.1", "v0.1.0", "v0.2.0", "v0.2.1"})
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--package-mirror", str(then), "--json")
    assert code == 0, err
    versions = {p["name"]: p["version"].lstrip("v") for p in json.loads(out)["packages"]}
    assert versions == {"shop_utils": "0.2.0", "shop_calendar": "0.2.0"}
    (pin,) = _pins(tmp_path)
    pinned = pin.read_bytes()
    spec = f"{repo.path}@{repo.head}"
    code, out, err = _run(tmp_path, "add", spec, "--rebuild", "--package-mirror", str(now), "--json")
    assert code == 0, err
    rebuilt = json.loads(out)
    assert {p["name"]: p["version"].lstrip("v") for p in rebuilt["packages"]} == versions
    assert not any("package_versions" in note for note in rebuilt["drift"]), rebuilt["drift"]
    assert pin.read_bytes() == pinned
    # a fresh home (this one keeps the packages it fetched) and a mirror without shop_utils 0.2.0
    fresh = tmp_path / "fresh"
    shutil.copytree(tmp_path / "pins", fresh / "pins")
    gone = mirror("gone", {"0.1.0", "0.3.0", "v0.1.0", "v0.2.0"})
    code, out, err = _run(fresh, "add", spec, "--rebuild", "--package-mirror", str(gone), "--json")
    assert code == 1 and "shop_utils" in err and len(_error_only(err).strip().splitlines()) == 1, err
    assert (fresh / "pins" / pin.name).read_bytes() == pinned


def test_a_project_without_a_profile_key_builds_under_the_derived_profile(tmp_path: Path) -> None:
    """dbt refuses a dbt_project.yml without ``profile:`` ("no profile was specified"); the harvester names the
    profile after the project and passes it to every dbt command, so such a project pins like any other."""
    import shutil

    from dbt_harvest.harvester.gitrepos import make_git_repo
    from tests.fixtures import fixture_dir

    source = tmp_path / "source"
    shutil.copytree(fixture_dir("clock"), source)
    project = source / "dbt_project.yml"
    lines = project.read_text().splitlines()
    assert any(line.startswith("profile:") for line in lines)
    project.write_text("".join(line + "\n" for line in lines if not line.startswith("profile:")))
    repo = make_git_repo(source, tmp_path / "repo")
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["id"].startswith("local__gym_memberships@") and summary["tables"]
    assert all(t["deterministic"] for t in summary["tables"])


def test_a_branch_needs_resolve_ref(tmp_path: Path) -> None:
    repo = fixture_repo("clock", tmp_path / "repo")
    code, _, err = _run(tmp_path, "add", f"{repo.path}@main")
    assert code == 1 and "--resolve-ref" in err and len(err.strip().splitlines()) == 1
    assert not _pins(tmp_path)


@pytest.mark.parametrize(
    "fixture, spec_tail, message",
    [
        ("build_fails", None, BUILD_FAILS_MARKER),
        ("empty_outputs", None, "every model came out empty"),
        ("no_project", None, "no dbt project"),
        ("uses_missing_package", None, f"cannot resolve package {MISSING_PACKAGE}"),
        ("clock", "@" + "0" * 40, "unknown commit"),
    ],
)
def test_bad_input_is_one_line_and_writes_no_pin(
    tmp_path: Path, mirror: Path, fixture: str, spec_tail: str | None, message: str
) -> None:
    repo = fixture_repo(fixture, tmp_path / "repo")
    spec = f"{repo.path}{spec_tail or '@' + repo.head}"
    code, out, err = _run(tmp_path, "add", spec, "--package-mirror", str(mirror))
    assert code == 1, (out, err)
    err = _error_only(err)
    assert message in err and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert not _pins(tmp_path)
    assert not (tmp_path / "home" / "gold").exists() or not any((tmp_path / "home" / "gold").iterdir())
    if fixture == "build_fails":  # the logs stay for inspection
        assert list((tmp_path / "home" / "builds").rglob("builds.log"))


@pytest.mark.parametrize("spec", ["not-a-spec", "acme/analytics@", "acme/analytics@a..b"])
def test_malformed_specs_are_usage_errors(tmp_path: Path, spec: str) -> None:
    code, out, err = _run(tmp_path, "add", spec)
    assert code == 2, (code, out, err)  # click's usage error: the usage line, then one "Error:" line
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0].startswith("Usage: ") and "SPEC" in lines[0], err
    assert lines[-1].startswith("Error: Invalid value for SPEC: ") and "malformed spec" in lines[-1], err
    assert not _pins(tmp_path) and not (tmp_path / "home").exists()


def test_unreachable_spec_is_a_one_line_error(tmp_path: Path) -> None:
    code, _, err = _run(tmp_path, "add", "/nowhere/at/all@abcdef1")
    err = _error_only(err)
    assert code == 1 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert not _pins(tmp_path)


def test_a_local_copy_is_pinned_under_its_origin_and_no_path_of_this_machine(tmp_path: Path) -> None:
    import pygit2

    repo = fixture_repo("clock", tmp_path / "copies" / "clock")
    code, out, err = _run(
        tmp_path, "add", f"{repo.path}@{repo.head}", "--origin", "https://github.com/acme/members", "--json"
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["id"] == f"acme__members@{repo.head[:12]}"
    assert summary["url"] == "https://github.com/acme/members.git" and summary["spec"] == f"acme/members@{repo.head}"
    (pin_file,) = _pins(tmp_path)
    assert str(tmp_path) not in pin_file.read_text()  # where the bytes came from stays under HARVEST_HOME
    # the same copy again, with the same origin: already pinned, found through the mirror kept under that name
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--origin", "https://github.com/acme/members")
    assert code == 0 and "already pinned" in out, err
    # without --origin, a copy whose origin remote is public is named after that remote
    pygit2.Repository(str(repo.path)).remotes.create("origin", "https://github.com/acme/member-copy.git")
    code, out, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--json")
    assert code == 0, err
    assert json.loads(out)["id"] == f"acme__member-copy@{repo.head[:12]}"
    assert not any(str(tmp_path) in p.read_text() for p in _pins(tmp_path))


def test_a_local_copy_without_a_public_name_is_named_after_its_dbt_project(tmp_path: Path) -> None:
    import yaml

    from dbt_harvest.core.errors import SpecError
    from dbt_harvest.harvester.add import AddOptions, identify
    from dbt_harvest.harvester.gitstore import GitStore
    from dbt_harvest.harvester.specs import parse_spec

    repo = fixture_repo("clock", tmp_path / "some-folder")
    spec = parse_spec(f"{repo.path}@{repo.head[:10]}")
    store = GitStore(tmp_path / "mirrors")
    project = yaml.safe_load((repo.path / "dbt_project.yml").read_text())["name"]
    found = identify(spec, AddOptions(), store)
    assert (found.slug, found.url) == (f"local__{project}", f"local://local/{project}")
    assert identify(spec, AddOptions(name="acme/members"), store).url == "local://acme/members"
    with pytest.raises(SpecError, match="not both"):
        identify(spec, AddOptions(name="a/b", origin="https://github.com/a/b"), store)
    code, _, err = _run(tmp_path, "add", f"{repo.path}@{repo.head}", "--origin", str(repo.path))
    assert code == 1 and "public git URL" in err and not _pins(tmp_path)


def test_repo_mirror_builds_owner_name_offline_with_the_pin_an_origin_copy_gets(tmp_path: Path) -> None:
    import tomllib

    repo = fixture_repo("clock", tmp_path / "mirror" / "acme" / "members")
    spec = f"acme/members@{repo.head}"
    # DIR/<owner>/<name>: the GitHub spec is fetched from the copy, never from the network
    code, out, err = _run(tmp_path / "a", "add", spec, "--repo-mirror", str(tmp_path / "mirror"), "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["id"] == f"acme__members@{repo.head[:12]}" and got["url"] == "https://github.com/acme/members.git"
    (pin_a,) = _pins(tmp_path / "a")
    assert str(tmp_path) not in pin_a.read_text()
    # the same commit pinned from the local path with --origin: the same identity, tables and gold
    code, out, err = _run(
        tmp_path / "b", "add", f"{repo.path}@{repo.head}", "--origin", "https://github.com/acme/members"
    )
    assert code == 0, err
    (pin_b,) = _pins(tmp_path / "b")
    a, b = (tomllib.loads(p.read_text()) for p in (pin_a, pin_b))
    for key in ("id", "spec", "url", "commit", "tree", "gold_sha256", "tables", "clock", "license"):
        assert a[key] == b[key], key
    # a mirror without the repository is a one-line error, not a silent fetch from the network
    code, _, err = _run(tmp_path / "c", "add", f"acme/other@{repo.head}", "--repo-mirror", str(tmp_path / "mirror"))
    assert code == 1 and "has no copy of acme/other" in err and not _pins(tmp_path / "c")
