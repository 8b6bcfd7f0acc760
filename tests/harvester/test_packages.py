"""Package resolution and vendoring without `dbt deps`, on original packages turned into git repos here.

The packages are tiny dbt projects written for these tests: ``acme/calc_utils`` (several tagged versions,
one a prerelease, one tagged ``v0.3.1``), ``acme/shop_helpers`` whose dbt name (``shop_helpers_dbt``)
differs from its repository name and which itself depends on calc_utils, and a Fivetran-style package
``acme/ledger`` whose ``integration_tests/`` project uses it as ``local: ../``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dbt_harvest.core.errors import PackageError
from dbt_harvest.core.pin import PackageRecord
from dbt_harvest.harvester.gitrepos import make_git_repo, make_package_mirror
from dbt_harvest.harvester.gitstore import GitStore
from dbt_harvest.harvester.packages import install_path, load_mirror, resolve_packages, vendor_packages
from dbt_harvest.harvester.packages.specs import read_declared

CALC_VERSIONS = ("0.1.0", "0.2.0", "v0.3.1", "0.4.0-b1", "1.0.0")


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _project_yml(name: str, version: str = "1.0.0", extra: str = "") -> str:
    return f"name: {name}\nversion: '{version}'\nconfig-version: 2\n{extra}"


def _packages_yml(*entries: str) -> str:
    return "packages:\n" + "".join(entries)


def _hub(package: str, version: str) -> str:
    return f"  - package: {package}\n    version: {version}\n"


def _calc_version(root: Path, tag: str) -> Path:
    version = tag.removeprefix("v")
    return _write(
        root / f"calc_{tag}",
        {
            "dbt_project.yml": _project_yml("calc_utils", version),
            "macros/calc.sql": (
                "{% macro double(x) %}(({{ x }}) * 2){% endmacro %}\n"
                f"{{% macro calc_version() %}}'{version}'{{% endmacro %}}\n"
            ),
        },
    )


def _helpers_version(root: Path, version: str, calc_range: str) -> Path:
    return _write(
        root / f"helpers_{version}",
        {
            "dbt_project.yml": _project_yml("shop_helpers_dbt", version),
            "packages.yml": _packages_yml(_hub("acme/calc_utils", calc_range)),
            "macros/helpers.sql": "{% macro paid_status() %}'paid'{% endmacro %}\n",
        },
    )


@pytest.fixture(scope="module")
def mirror_dir(tmp_path_factory) -> Path:
    """A package mirror DIR/<org>/<package_name> holding the original test packages."""
    src = tmp_path_factory.mktemp("pkgsrc")
    return make_package_mirror(
        tmp_path_factory.mktemp("mirror") / "m",
        {
            "acme/calc_utils": {tag: _calc_version(src, tag) for tag in CALC_VERSIONS},
            "acme/shop_helpers": {
                "0.1.0": _helpers_version(src, "0.1.0", '[">=0.1.0", "<0.2.0"]'),
                "0.2.0": _helpers_version(src, "0.2.0", '[">=0.2.0", "<0.4.0"]'),
                "0.3.0": _helpers_version(src, "0.3.0", '">=1.0.0"'),
            },
        },
    )


@pytest.fixture()
def store(tmp_path: Path) -> GitStore:
    return GitStore(tmp_path / "mirrors")


def _project(tmp_path: Path, packages_yml: str, name: str = "shop") -> Path:
    return _write(
        tmp_path / "proj",
        {
            "dbt_project.yml": _project_yml(name, extra="profile: harvest\n"),
            "packages.yml": packages_yml,
        },
    )


def _by_name(records: tuple[PackageRecord, ...]) -> dict[str, PackageRecord]:
    return {r.name: r for r in records}


def test_range_picks_newest_tag_inside_range(tmp_path, store, mirror_dir):
    project = _project(tmp_path, _packages_yml(_hub("acme/calc_utils", '[">=0.2.0", "<1.0.0"]')))
    (record,) = resolve_packages(project, store, load_mirror(mirror_dir), network=False)
    tags = store.tags(store.mirror(str(mirror_dir / "acme/calc_utils")))
    # served by the package mirror: no public URL to record, and never the mirror's path on this machine
    assert record == PackageRecord(
        name="calc_utils",
        source="hub:acme/calc_utils",
        requested=">=0.2.0,<1.0.0",
        version="0.3.1",
        commit=tags["v0.3.1"],
        url="",
    )


def test_a_package_from_the_mirror_vendors_again_without_its_path(tmp_path, store, mirror_dir, monkeypatch):
    project = _project(tmp_path, _packages_yml(_hub("acme/calc_utils", '[">=0.2.0", "<1.0.0"]')))
    records = resolve_packages(project, store, load_mirror(mirror_dir), network=False)
    vendor_packages(project, records, store)  # the mirror made while resolving serves it
    fresh = GitStore(tmp_path / "fresh-mirrors")  # another HARVEST_HOME: only $HARVEST_PACKAGE_MIRROR can serve it
    monkeypatch.delenv("HARVEST_PACKAGE_MIRROR", raising=False)
    with pytest.raises(PackageError, match="HARVEST_PACKAGE_MIRROR"):
        vendor_packages(project, records, fresh)
    monkeypatch.setenv("HARVEST_PACKAGE_MIRROR", str(mirror_dir))
    vendor_packages(project, records, fresh)
    assert (project / "dbt_packages" / "calc_utils" / "dbt_project.yml").is_file()


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ('"0.2.0"', "0.2.0"),  # an exact version
        ('">=0.3.5"', "1.0.0"),  # open range: the newest release
        ('[">=0.4.0-a1", "<1.0.0"]', "0.4.0-b1"),  # a prerelease only when one is asked for
        ('"<0.2.0"', "0.1.0"),
    ],
)
def test_version_semantics(tmp_path, store, mirror_dir, asked, expected):
    project = _project(tmp_path, _packages_yml(_hub("acme/calc_utils", asked)))
    (record,) = resolve_packages(project, store, load_mirror(mirror_dir), network=False)
    assert record.version == expected


def test_a_rebuild_finds_the_pinned_packages_again_and_refuses_one_it_cannot(tmp_path, store, mirror_dir, extra_repo):
    """``pinned`` (a rebuild): the records come back as they are, each checked against its source at the
    recorded version or commit; the ranges are never resolved again."""
    project = _project(tmp_path, _packages_yml(_hub("acme/calc_utils", '[">=0.2.0", "<1.0.0"]')))
    mirror = load_mirror(mirror_dir)
    tags = store.tags(store.mirror(str(mirror_dir / "acme/calc_utils")))
    older = PackageRecord("calc_utils", "hub:acme/calc_utils", ">=0.2.0,<1.0.0", "0.2.0", tags["0.2.0"], "")
    git = PackageRecord("extra_pkg", f"git:{extra_repo.path}#subdirectory=dbt", "x", "", extra_repo.commits[0], "")
    assert resolve_packages(project, store, mirror, network=False) != (older,)  # the range alone picks 0.3.1
    assert resolve_packages(project, store, mirror, network=False, pinned=(older, git)) == (older, git)
    assert resolve_packages(project, store, mirror, network=False, pinned=()) == ()
    moved = PackageRecord("calc_utils", "hub:acme/calc_utils", ">=0.2.0,<1.0.0", "0.2.0", tags["1.0.0"], "")
    with pytest.raises(PackageError, match=r"calc_utils .*the pin records 0\.2\.0 at .*but its source gives 0\.2\.0"):
        resolve_packages(project, store, mirror, network=False, pinned=(moved,))
    missing = PackageRecord("calc_utils", "hub:acme/calc_utils", "", "0.9.0", tags["1.0.0"], "")
    with pytest.raises(PackageError):
        resolve_packages(project, store, mirror, network=False, pinned=(missing,))


def test_transitive_package_and_combined_ranges(tmp_path, store, mirror_dir):
    project = _project(
        tmp_path,
        _packages_yml(
            _hub("acme/shop_helpers", '[">=0.2.0", "<0.3.0"]'),
            _hub("acme/calc_utils", '[">=0.1.0", "<1.0.0"]'),
        ),
    )
    mirror = load_mirror(mirror_dir)
    records = resolve_packages(project, store, mirror, network=False)
    assert [r.name for r in records] == ["calc_utils", "shop_helpers_dbt"]  # dbt names, sorted
    found = _by_name(records)
    assert found["shop_helpers_dbt"].source == "hub:acme/shop_helpers"
    assert found["shop_helpers_dbt"].version == "0.2.0"
    # root allows <1.0.0, shop_helpers 0.2.0 allows <0.4.0: the newest inside both, not 1.0.0 or 0.4.0-b1
    assert found["calc_utils"].version == "0.3.1"
    assert found["calc_utils"].requested == ">=0.1.0,<1.0.0,>=0.2.0,<0.4.0"
    assert resolve_packages(project, GitStore(tmp_path / "other"), mirror, network=False) == records


def test_transitive_only_package_is_found(tmp_path, store, mirror_dir):
    project = _project(tmp_path, _packages_yml(_hub("acme/shop_helpers", '"0.1.0"')))
    found = _by_name(resolve_packages(project, store, load_mirror(mirror_dir), network=False))
    assert set(found) == {"calc_utils", "shop_helpers_dbt"}
    assert found["calc_utils"].version == "0.1.0"


def test_conflicting_ranges_name_both_requesters(tmp_path, store, mirror_dir):
    project = _project(
        tmp_path,
        _packages_yml(
            _hub("acme/calc_utils", '[">=0.2.0", "<1.0.0"]'),
            _hub("acme/shop_helpers", '"0.3.0"'),  # requires calc_utils >=1.0.0
        ),
    )
    with pytest.raises(PackageError) as info:
        resolve_packages(project, store, load_mirror(mirror_dir), network=False)
    message = str(info.value)
    assert "acme/calc_utils" in message and "the root project" in message
    assert "package shop_helpers_dbt 0.3.0" in message and "\n" not in message


def test_no_version_in_range(tmp_path, store, mirror_dir):
    project = _project(tmp_path, _packages_yml(_hub("acme/calc_utils", '">=2.0.0"')))
    with pytest.raises(PackageError, match=r"no version of acme/calc_utils satisfies >=2.0.0 \(available: "):
        resolve_packages(project, store, load_mirror(mirror_dir), network=False)


def test_missing_package_fails_fast_with_one_line(tmp_path, store, mirror_dir):
    project = _project(tmp_path, _packages_yml(_hub("acme/nowhere", '"1.0.0"')))
    expected = (
        f"cannot resolve package acme/nowhere: not in the package mirror {mirror_dir} and the dbt hub "
        "is unreachable (pass --package-mirror)"
    )
    with pytest.raises(PackageError) as info:
        resolve_packages(project, store, load_mirror(mirror_dir), network=False)
    assert str(info.value) == expected
    with pytest.raises(PackageError, match="no package mirror was given and the dbt hub is unreachable"):
        resolve_packages(project, store, None, network=False)


def test_package_lock_wins_when_its_hash_matches(tmp_path, store, mirror_dir):
    project = _project(tmp_path, _packages_yml(_hub("acme/calc_utils", '[">=0.2.0", "<1.0.0"]')))
    digest = read_declared(project).sha1_hash
    lock = "packages:\n  - package: acme/calc_utils\n    name: calc_utils\n    version: 0.2.0\n"
    (project / "package-lock.yml").write_text(lock + f"sha1_hash: {digest}\n")
    (record,) = resolve_packages(project, store, load_mirror(mirror_dir), network=False)
    assert (record.version, record.requested) == ("0.2.0", ">=0.2.0,<1.0.0")
    # a lock written for other packages.yml content is ignored, as dbt deps ignores it
    (project / "package-lock.yml").write_text(lock + "sha1_hash: " + "0" * 40 + "\n")
    (record,) = resolve_packages(project, store, load_mirror(mirror_dir), network=False)
    assert record.version == "0.3.1"


@pytest.fixture()
def extra_repo(tmp_path: Path):
    """A git-only package (not on the hub) whose dbt project lives in a subdirectory."""
    src = _write(
        tmp_path / "extra_src",
        {
            "README.md": "extra\n",
            "dbt/dbt_project.yml": _project_yml("extra_pkg"),
            "dbt/macros/extra.sql": "{% macro extra() %}1{% endmacro %}\n",
        },
    )
    return make_git_repo(
        src, tmp_path / "extra", commits=[{"files": {"dbt/macros/more.sql": "-- more\n"}}], tags={"0.2.0": 0}
    )


def test_git_package_with_revision_subdirectory_and_mirror_map(tmp_path, store, mirror_dir, extra_repo):
    url = "https://git.example.invalid/acme/extra.git"
    mirror_root = tmp_path / "mirror2"
    mirror_root.mkdir()
    (mirror_root / "mirror.toml").write_text(f'"{url}" = "{os.path.relpath(extra_repo.path, mirror_root)}"\n')
    project = _project(tmp_path, _packages_yml(f"  - git: {url}\n    revision: 0.2.0\n    subdirectory: dbt\n"))
    (record,) = resolve_packages(project, store, load_mirror(mirror_root), network=False)
    assert record == PackageRecord(
        name="extra_pkg",
        source=f"git:{url}#subdirectory=dbt",
        requested="0.2.0",
        version="",
        commit=extra_repo.commits[0],
        url=url,  # the public URL packages.yml names, not the mirror's path
    )
    vendor_packages(project, (record,), store)
    vendored = project / "dbt_packages" / "extra_pkg"
    assert sorted(p.name for p in vendored.rglob("*")) == ["dbt_project.yml", "extra.sql", "macros"]
    # a full sha and a local path work without any mirror; unmapped remote URLs fail offline
    project.joinpath("packages.yml").write_text(
        _packages_yml(f"  - git: {extra_repo.path}\n    revision: {extra_repo.head}\n    subdirectory: dbt\n")
    )
    (record,) = resolve_packages(project, store, None, network=False)
    assert (record.commit, record.requested) == (extra_repo.head, extra_repo.head)
    project.joinpath("packages.yml").write_text(_packages_yml(f"  - git: {url}\n    revision: 0.2.0\n"))
    with pytest.raises(PackageError, match="network is unreachable"):
        resolve_packages(project, store, None, network=False)


def test_conflicting_git_revisions(tmp_path, store, extra_repo):
    project = _project(
        tmp_path,
        _packages_yml(
            f"  - git: {extra_repo.path}\n    revision: 0.2.0\n    subdirectory: dbt\n",
            f"  - git: {extra_repo.path}.git\n    revision: main\n    subdirectory: dbt\n",
        ),
    )
    with pytest.raises(PackageError, match="conflicting revisions"):
        resolve_packages(project, store, None, network=False)


def test_load_mirror_from_environment(tmp_path, monkeypatch, mirror_dir):
    monkeypatch.delenv("HARVEST_PACKAGE_MIRROR", raising=False)
    assert load_mirror(None) is None
    monkeypatch.setenv("HARVEST_PACKAGE_MIRROR", str(mirror_dir))
    assert load_mirror(None).root == mirror_dir
    with pytest.raises(PackageError, match="is not a folder"):
        load_mirror(tmp_path / "absent")


# -- a Fivetran-style package: integration_tests/ uses the package around it as `local: ../` ---------


def _ledger_repo(tmp_path: Path):
    src = _write(
        tmp_path / "ledger_src",
        {
            "dbt_project.yml": _project_yml("ledger"),
            "packages.yml": _packages_yml(_hub("acme/shop_helpers", '[">=0.2.0", "<0.3.0"]')),
            "models/ledger_totals.sql": (
                "select status, sum(amount) as total, {{ calc_utils.double('sum(amount)') }} as doubled\n"
                "from {{ ref('payments') }}\nwhere status = {{ shop_helpers_dbt.paid_status() }}\n"
                "group by status\n"
            ),
            "integration_tests/dbt_project.yml": _project_yml("ledger_integration_tests", extra="profile: harvest\n"),
            "integration_tests/packages.yml": _packages_yml("  - local: ../\n"),
            "integration_tests/seeds/payments.csv": "id,status,amount\n1,paid,10\n2,paid,5\n3,void,7\n",
            "integration_tests/models/calc_check.sql": "select {{ calc_utils.calc_version() }} as calc_version\n",
        },
    )
    return make_git_repo(src, tmp_path / "ledger")


_DBT_BUILD = """
import json, sys
from dbt.cli.main import dbtRunner
result = dbtRunner().invoke(["build", "--project-dir", ".", "--profiles-dir", "."])
print(json.dumps({"success": result.success, "error": str(result.exception or "")}))
"""


def test_vendored_packages_build_with_real_dbt_without_deps(tmp_path, store, mirror_dir):
    ledger = _ledger_repo(tmp_path)
    repo = store.mirror(str(ledger.path))
    workspace = tmp_path / "ws"
    store.export(repo, ledger.head, workspace)
    project = workspace / "integration_tests"
    records = resolve_packages(project, store, load_mirror(mirror_dir), network=False, tree=workspace)
    assert [(r.name, r.source, r.version) for r in records] == [
        ("calc_utils", "hub:acme/calc_utils", "0.3.1"),
        ("ledger", "local:..", ""),
        ("shop_helpers_dbt", "hub:acme/shop_helpers", "0.2.0"),
    ]
    assert _by_name(records)["ledger"].commit == ""
    vendor_packages(project, records, store, workspace=workspace)
    installed = install_path(project)
    assert sorted(p.name for p in installed.iterdir()) == ["calc_utils", "ledger", "shop_helpers_dbt"]
    assert os.readlink(installed / "ledger") == "../.."
    assert not any(p.name == ".git" for p in installed.rglob("*"))
    assert not (project / "package-lock.yml").exists()
    # copying the workspace keeps the relative link working (as `harvest add` does for each build)
    copy = tmp_path / "build1"
    shutil.copytree(workspace, copy, symlinks=True)
    build_dir = copy / "integration_tests"
    db = tmp_path / "out.duckdb"
    (build_dir / "profiles.yml").write_text(
        f"harvest:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: {db}\n"
        "      threads: 1\n      schema: main\n"
    )
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "PYTHONHASHSEED": "0"}
    run = subprocess.run(
        [sys.executable, "-c", _DBT_BUILD], cwd=build_dir, env=env, capture_output=True, text=True, timeout=240
    )
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["success"], run.stdout[-3000:]
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("select status, total, doubled from main.ledger_totals").fetchall() == [("paid", 15, 30)]
        assert con.execute("select calc_version from main.calc_check").fetchall() == [("0.3.1",)]


def test_vendoring_replaces_a_committed_dbt_packages_folder(tmp_path, store, mirror_dir):
    project = _project(tmp_path, _packages_yml(_hub("acme/calc_utils", '"0.2.0"')))
    _write(project, {"dbt_packages/calc_utils/stale.sql": "old", "dbt_packages/leftover/x.sql": "old"})
    records = resolve_packages(project, store, load_mirror(mirror_dir), network=False)
    vendor_packages(project, records, store)
    assert sorted(p.name for p in (project / "dbt_packages").iterdir()) == ["calc_utils"]
    text = (project / "dbt_packages/calc_utils/macros/calc.sql").read_text()
    assert "'0.2.0'" in text
    with pytest.raises(PackageError, match="outside the workspace"):
        local = _write(tmp_path / "elsewhere", {"dbt_project.yml": _project_yml("elsewhere")})
        vendor_packages(
            project,
            (PackageRecord("elsewhere", f"local:{os.path.relpath(local, project)}", "", "", "", ""),),
            store,
            workspace=project,
        )


@pytest.mark.skipif(shutil.which("git") is None, reason="dbt deps clones git packages with the git CLI")
def test_matches_a_lock_written_by_real_dbt_deps(tmp_path, store, extra_repo):
    """`dbt deps` runs offline for git (local path) and local packages: our hash and commit agree."""
    _write(tmp_path / "lpkg", {"dbt_project.yml": _project_yml("lpkg")})
    project = _project(
        tmp_path,
        _packages_yml(
            f"  - git: {extra_repo.path}\n    revision: \"{{{{ env_var('EXTRA_REV', '0.2.0') }}}}\"\n"
            "    subdirectory: dbt\n",
            "  - local: ../lpkg\n",
        ),
    )
    env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    env.pop("EXTRA_REV", None)
    code = (
        "from dbt.cli.main import dbtRunner; r = dbtRunner().invoke(['deps', '--project-dir', '.']); print(r.success)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True, timeout=240
    )
    assert run.stdout.strip().endswith("True"), run.stdout[-2000:]
    import yaml

    lock = yaml.safe_load((project / "package-lock.yml").read_text())
    assert lock["sha1_hash"] == read_declared(project).sha1_hash
    shutil.rmtree(project / "dbt_packages")
    found = _by_name(resolve_packages(project, store, None, network=False, tree=tmp_path))
    dbt_git = next(p for p in lock["packages"] if "git" in p)
    assert found[dbt_git["name"]].commit == dbt_git["revision"] == extra_repo.commits[0]
    assert set(found) == {p["name"] for p in lock["packages"]}
    assert found[dbt_git["name"]].requested == "0.2.0"  # rendered as dbt renders it


def test_invalid_spec_is_one_line(tmp_path, store):
    project = _project(tmp_path, _packages_yml(_hub("calc_utils", '"0.2.0"')))
    with pytest.raises(PackageError, match=r"packages.yml: invalid package spec \(.*namespace") as info:
        resolve_packages(project, store, None, network=False)
    assert "\n" not in str(info.value)


def test_probe_fails_fast_offline_and_mirror_map_names_hub_ids(tmp_path, store, mirror_dir, monkeypatch):
    from dbt_harvest.harvester.packages import sources

    # network=None probes the hub host; an unresolvable host (RFC 2606 .invalid) is the offline case
    monkeypatch.setattr(sources, "HUB_HOST", "hub.invalid")
    sources.host_reachable.cache_clear()
    project = _project(tmp_path, _packages_yml(_hub("other/calc", '"0.2.0"')))
    with pytest.raises(PackageError, match="not in the package mirror .* the dbt hub is unreachable"):
        resolve_packages(project, store, load_mirror(mirror_dir), network=None)
    # a mirror.toml entry maps the hub id to a repository elsewhere (relative to the mirror folder)
    mapped = tmp_path / "mapped"
    mapped.mkdir()
    (mapped / "mirror.toml").write_text(
        f'[packages]\n"other/calc" = "{os.path.relpath(mirror_dir / "acme" / "calc_utils", mapped)}"\n'
    )
    (record,) = resolve_packages(project, store, load_mirror(mapped), network=None)
    assert (record.name, record.source, record.version) == ("calc_utils", "hub:other/calc", "0.2.0")


def test_a_range_resolves_as_of_a_date_among_the_releases_made_by_then(tmp_path, store, mirror_dir):
    """``as_of`` (a history fix's parent): the newest release in range whose commit was made by then, as `dbt
    deps` resolved on that day; a date before every release in range is a PackageError saying so."""
    import pygit2

    project = _project(tmp_path, _packages_yml(_hub("acme/calc_utils", '[">=0.2.0", "<1.0.0"]')))
    mirror = load_mirror(mirror_dir)
    repo = store.mirror(str(mirror_dir / "acme/calc_utils"))
    tags = store.tags(repo)
    made = {
        tag: int(repo[commit].commit_time) for tag, commit in tags.items() if isinstance(repo[commit], pygit2.Commit)
    }
    (today,) = resolve_packages(project, store, mirror, network=False)
    assert today.version == "0.3.1"
    (then,) = resolve_packages(project, store, mirror, network=False, as_of=made["0.2.0"])
    assert then.version == "0.2.0" and then.commit == tags["0.2.0"]
    with pytest.raises(PackageError, match="released by the date"):
        resolve_packages(project, store, mirror, network=False, as_of=made["0.2.0"] - 1)


def test_a_substitute_stands_in_only_for_a_release_no_source_holds(tmp_path, store, mirror_dir):
    """`harvest add --package-version`: a project pinned to a tag its mirror lacks (a real one asks for
    dbt_expectations 0.10.10, which no snapshot holds) builds with the release the user names, and the record
    says so. Refused: a substitute no source holds, one for a package that resolves as asked, and one for a
    package the project does not declare."""
    project = _project(tmp_path, _packages_yml(_hub("acme/calc_utils", '"0.3.2"')))
    mirror = load_mirror(mirror_dir)
    with pytest.raises(PackageError, match=r"no version of acme/calc_utils satisfies 0.3.2"):
        resolve_packages(project, store, mirror, network=False)
    (record,) = resolve_packages(project, store, mirror, network=False, substitutes={"Acme/Calc_Utils": "0.3.1"})
    tags = store.tags(store.mirror(str(mirror_dir / "acme/calc_utils")))
    assert (record.requested, record.version, record.commit, record.substituted) == (
        "0.3.2",
        "0.3.1",
        tags["v0.3.1"],
        True,
    )
    # a rebuild finds the substitute again from the pin's record alone (no --package-version)
    assert resolve_packages(project, store, mirror, network=False, pinned=(record,)) == (record,)
    with pytest.raises(PackageError, match=r"--package-version 0.9.9 is not a usable release"):
        resolve_packages(project, store, mirror, network=False, substitutes={"acme/calc_utils": "0.9.9"})
    exact = _project(tmp_path / "exact", _packages_yml(_hub("acme/calc_utils", '"0.2.0"')))
    with pytest.raises(PackageError, match=r"resolves as the project asks \(to 0.2.0\).*drop it"):
        resolve_packages(exact, store, mirror, network=False, substitutes={"acme/calc_utils": "0.1.0"})
    with pytest.raises(PackageError, match=r"names acme/other=1.0.0, which no package of the project is"):
        resolve_packages(
            project, store, mirror, network=False, substitutes={"acme/calc_utils": "0.3.1", "acme/other": "1.0.0"}
        )


def test_a_substituted_package_is_written_in_the_pin_only_when_set() -> None:
    from dataclasses import replace

    from dbt_harvest.core.pin import pin_from_dict, read_pin

    pins = Path(__file__).resolve().parents[2] / "pins"
    pin = read_pin(pins / "Data-Engineer-Camp__dbt-dimensional-modelling@f04d1876137e.toml")
    assert pin.packages and "substituted" not in pin.to_toml()  # an older pin keeps its bytes
    first = replace(pin.packages[0], requested="9.9.9", substituted=True)
    changed = replace(pin, packages=(first, *pin.packages[1:]))
    text = changed.to_toml()
    assert text.count("substituted = true") == 1
    import tomllib

    data = tomllib.loads(text)
    del data["digest"]
    assert pin_from_dict(data).packages == changed.packages


def test_package_version_usage_errors_exit_2(tmp_path: Path) -> None:
    from tests.cli_home import run_cli

    spec = "owner/name@" + "a" * 40
    code, _, err = run_cli(tmp_path, "add", spec, "--package-version", "dbt_utils")
    assert code == 2 and "is not HUB_ID=VERSION" in err
    code, _, err = run_cli(tmp_path, "add", spec, "--package-version", "a/b=1.0.0", "--package-version", "A/B=1.0.1")
    assert code == 2 and "given twice" in err
    code, _, err = run_cli(tmp_path, "add", spec, "--rebuild", "--package-version", "a/b=1.0.0")
    assert code == 2 and "a rebuild builds with the pin's own packages" in err
