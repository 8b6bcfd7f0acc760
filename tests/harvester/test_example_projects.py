"""Tests for the embedded example, the fixture projects, and the git repositories made from them.

Why it exists: every end-to-end test of the harvester, the mutators and the mint stands on these
projects. These tests pin down what the others rely on: repositories come out with the same commit ids
everywhere; the example and each fixture really build with dbt-duckdb and behave as documented in
``tests/fixtures/__init__.py``; and the example contains every business rule the mutators target.
Real git (pygit2), real dbt (in a child process), real DuckDB; nothing mocked.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pygit2
import pytest
import yaml

from dbt_harvest.harvester.example import (
    EXAMPLE_PACKAGE_VERSIONS,
    PACKAGES_DIR,
    PROJECT_DIR,
    Example,
    example_packages,
    materialize_example,
)
from dbt_harvest.harvester.gitrepos import (
    AUTHOR_EMAIL,
    AUTHOR_NAME,
    Gitlink,
    GitRepoError,
    Symlink,
    make_git_repo,
    make_package_mirror,
)
from tests.fixtures import (
    BUILD_FAILS_MARKER,
    CLOCK_NEWEST_SEED_DATE,
    FIVETRAN_SCHEMA,
    FIXTURE_NAMES,
    LOCKED_VERSIONS,
    MISSING_PACKAGE,
    PROJECTS,
    fixture_dir,
    fixture_repo,
    run_dbt,
    vendor_packages,
)

HAS_FAKETIME = shutil.which("faketime") is not None
#: A clock at or after the newest date in the example's seeds (2024-12-27).
EXAMPLE_CLOCK = "@2024-12-31 12:00:00"


# ----------------------------------------------------------------------------- helpers


def _tree_files(repo: pygit2.Repository, commit: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}

    def walk(tree: pygit2.Tree, prefix: str) -> None:
        for entry in tree:
            path = f"{prefix}{entry.name}"
            if entry.type_str == "tree":
                walk(repo[entry.id], path + "/")
            elif entry.type_str == "blob":
                files[path] = repo[entry.id].data

    walk(repo[commit].peel(pygit2.Commit).tree, "")
    return files


def _folder_files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def _copy_project(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("target", "logs", "dbt_packages"))
    return dest


def _table_counts(db: Path, schema: str = "main") -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = [
            r[0]
            for r in con.execute(
                "select table_name from information_schema.tables where table_schema = ?", [schema]
            ).fetchall()
        ]
        return {n: con.execute(f'select count(*) from "{schema}"."{n}"').fetchone()[0] for n in names}
    finally:
        con.close()


def _fingerprint(db: Path, table: str) -> str:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = sorted(repr(r) for r in con.execute(f"select * from main.{table}").fetchall())
    finally:
        con.close()
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _sql(rel: str) -> str:
    return (PROJECT_DIR / rel).read_text()


def _compact(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower())


# ----------------------------------------------------------------------------- (a) git repositories


def test_same_folder_gives_same_commit_ids_in_another_process(tmp_path: Path) -> None:
    first = make_git_repo(PROJECT_DIR, tmp_path / "one")
    script = (
        "import sys; from pathlib import Path; from dbt_harvest.harvester.gitrepos import make_git_repo; "
        "print(make_git_repo(Path(sys.argv[1]), Path(sys.argv[2])).head)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(PROJECT_DIR), str(tmp_path / "two")],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "TZ": "Asia/Tokyo", "HOME": str(tmp_path), "PYTHONPATH": ":".join(sys.path)},
    )
    assert done.stdout.strip() == first.head
    assert len(first.commits) == 1 and re.fullmatch(r"[0-9a-f]{40}", first.head)
    commit = pygit2.Repository(str(first.path))[first.head]
    assert (commit.author.name, commit.author.email) == (AUTHOR_NAME, AUTHOR_EMAIL)
    assert commit.committer.time == commit.author.time


def test_commit_tree_holds_exactly_the_folder(tmp_path: Path) -> None:
    repo = make_git_repo(PROJECT_DIR, tmp_path / "repo")
    assert _tree_files(pygit2.Repository(str(repo.path)), repo.head) == _folder_files(PROJECT_DIR)
    assert (repo.path / "dbt_project.yml").is_file()  # working tree checked out
    assert pygit2.Repository(str(repo.path)).head.shorthand == "main"


def test_history_with_overlays_and_tags(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "models").mkdir(parents=True)
    (src / "models" / "a.sql").write_text("select 1 as a\n")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    repo = make_git_repo(
        src,
        tmp_path / "repo",
        commits=[
            {"files": {"models/b.sql": "select 2 as b\n"}, "message": "add b", "tag": "0.2.0"},
            {"files": {"models/a.sql": None, "link": Symlink("../outside"), "vendor/lib": Gitlink("ab" * 20)}},
        ],
        tags={"0.1.0": 0},
        branch="trunk",
    )
    git = pygit2.Repository(str(repo.path))
    assert len(repo.commits) == 3 and repo.head == repo.commits[-1]
    assert repo.tags == {"0.1.0": repo.commits[0], "0.2.0": repo.commits[1]}
    for name, commit in repo.tags.items():
        assert str(git.revparse_single(name).peel(pygit2.Commit).id) == commit
    assert set(_tree_files(git, repo.commits[0])) == {"models/a.sql"}
    assert set(_tree_files(git, repo.commits[1])) == {"models/a.sql", "models/b.sql"}
    head_tree = git[repo.head].peel(pygit2.Commit).tree
    assert head_tree["link"].filemode == pygit2.enums.FileMode.LINK
    assert git[head_tree["link"].id].data == b"../outside"
    assert head_tree["vendor"] and git[head_tree["vendor"].id]["lib"].filemode == pygit2.enums.FileMode.COMMIT
    assert "models/a.sql" not in _tree_files(git, repo.head)
    assert [str(c.id) for c in git.walk(repo.head)] == list(reversed(repo.commits))
    assert git.head.shorthand == "trunk"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tags": {"x": 5}}, "points at commit 5"),
        ({"commits": [{"files": {"../evil": "x"}}]}, "bad path"),
        ({"commits": [{"nope": 1}]}, "unknown key"),
    ],
)
def test_bad_histories_are_refused(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(GitRepoError, match=message):
        make_git_repo(fixture_dir("clock"), tmp_path / "repo", **kwargs)


def test_destination_in_use_is_refused(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    with pytest.raises(GitRepoError, match="not an empty folder"):
        make_git_repo(fixture_dir("clock"), tmp_path / "busy")


def test_package_mirror_layout_and_version_tags(tmp_path: Path) -> None:
    mirror = make_package_mirror(tmp_path / "mirror", example_packages())
    assert sorted(p.relative_to(mirror).as_posix() for p in mirror.glob("*/*")) == [
        "harvestlabs/shop_calendar",
        "harvestlabs/shop_utils",
    ]
    utils = pygit2.Repository(str(mirror / "harvestlabs" / "shop_utils"))
    calendar = pygit2.Repository(str(mirror / "harvestlabs" / "shop_calendar"))
    assert sorted(r.removeprefix("refs/tags/") for r in utils.references if r.startswith("refs/tags/")) == [
        "0.1.0",
        "0.2.0",
        "0.3.0",
        "0.3.1",
        "1.0.0",
    ]
    assert sorted(r.removeprefix("refs/tags/") for r in calendar.references if r.startswith("refs/tags/")) == [
        "v0.1.0",
        "v0.2.0",
        "v0.2.1",
        "v1.0.0",
    ]
    for repo, folder in ((utils, PACKAGES_DIR / "shop_utils"), (calendar, PACKAGES_DIR / "shop_calendar")):
        for version_dir in folder.iterdir():
            commit = str(repo.revparse_single(version_dir.name).peel(pygit2.Commit).id)
            files = _tree_files(repo, commit)
            assert files == _folder_files(version_dir)
            declared = yaml.safe_load(files["dbt_project.yml"])["version"]
            assert declared == version_dir.name.removeprefix("v")
    # history is in ascending version order: the newest release is the branch head
    assert str(utils.revparse_single("1.0.0").peel(pygit2.Commit).id) == str(utils.head.target)


def test_package_mirror_refuses_a_bad_hub_id(tmp_path: Path) -> None:
    with pytest.raises(GitRepoError, match="<org>/<package_name>"):
        make_package_mirror(tmp_path / "m", {"shop_utils": PACKAGES_DIR / "shop_utils"})


def test_materialize_example(tmp_path: Path) -> None:
    example = materialize_example(tmp_path / "demo")
    again = materialize_example(tmp_path / "elsewhere")
    assert isinstance(example, Example)
    assert example.commit == again.commit
    assert example.spec == f"{example.project_repo}@{example.commit}"
    git = pygit2.Repository(str(example.project_repo))
    assert str(git.head.target) == example.commit
    assert _tree_files(git, example.commit) == _folder_files(PROJECT_DIR)
    assert (example.mirror / "harvestlabs" / "shop_utils" / ".git").is_dir()
    assert (example.mirror / "harvestlabs" / "shop_calendar" / ".git").is_dir()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind
    with pytest.raises(GitRepoError, match="not empty"):
        materialize_example(tmp_path / "demo")


def test_materialize_example_reuses_an_identical_example_and_repairs_a_broken_one(tmp_path: Path) -> None:
    first = materialize_example(tmp_path / "demo")
    marker = first.project_repo / ".git" / "kept"
    marker.write_text("same example, same folder")
    again = materialize_example(tmp_path / "demo", reuse=True)
    assert again == first and marker.exists()  # identical: left alone
    shutil.rmtree(first.mirror / "harvestlabs" / "shop_calendar")
    repaired = materialize_example(tmp_path / "demo", reuse=True)
    assert repaired == first and not marker.exists()  # rewritten whole
    assert (repaired.mirror / "harvestlabs" / "shop_calendar" / ".git").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]


def test_every_fixture_makes_a_repository(tmp_path: Path) -> None:
    assert sorted(p.name for p in PROJECTS.iterdir() if p.is_dir()) == sorted(FIXTURE_NAMES)
    for name in FIXTURE_NAMES:
        repo = fixture_repo(name, tmp_path / name)
        assert _tree_files(pygit2.Repository(str(repo.path)), repo.head) == _folder_files(fixture_dir(name))


# ----------------------------------------------------------------------------- (b) real dbt builds


@pytest.mark.slow
def test_example_builds_and_its_dbt_tests_pass(tmp_path: Path) -> None:
    project = _copy_project(PROJECT_DIR, tmp_path / "project")
    vendor_packages(project)
    result = run_dbt(project, tmp_path, faketime=EXAMPLE_CLOCK if HAS_FAKETIME else None)
    assert result.ok, result.first_error
    counts = _table_counts(result.duckdb_path)
    models = {p.stem for p in (project / "models").rglob("*.sql")}
    seeds = {p.stem for p in (project / "seeds").glob("*.csv")}
    assert set(counts) == models | seeds
    assert all(counts[s] >= 15 for s in seeds), counts
    non_empty = models - ({"active_customers"} if not HAS_FAKETIME else set())
    assert all(counts[m] > 0 for m in non_empty), counts
    con = duckdb.connect(str(result.duckdb_path), read_only=True)
    try:
        # the right package versions are in: shop_utils 0.3.1 returns margins as percentages
        assert con.execute("select max(margin_pct) from product_performance").fetchone()[0] > 1
        # shop_calendar 0.2.1 counts days forward (0.2.0 returned them negated)
        assert con.execute("select min(days_since_last_order) from dim_customers").fetchone()[0] >= 0
        # the NULL test flag keeps customers: more real customers than customers flagged false
        flagged_false = con.execute("select count(*) from raw_customers where not is_test_account").fetchone()[0]
        assert counts["dim_customers"] > flagged_false
        # every documented column exists in the built table, and vice versa
        for yml in (project / "models").rglob("*.yml"):
            for model in yaml.safe_load(yml.read_text())["models"]:
                built = [
                    r[0]
                    for r in con.execute(
                        "select column_name from information_schema.columns where table_name = ? "
                        "order by ordinal_position",
                        [model["name"]],
                    ).fetchall()
                ]
                assert built == [c["name"] for c in model["columns"]], model["name"]
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "versions, missing",
    [
        ({"shop_utils": "0.2.0", "shop_calendar": "v0.2.1"}, "margin_pct"),
        ({"shop_utils": "1.0.0", "shop_calendar": "v1.0.0"}, "month_start"),
    ],
)
def test_example_needs_a_version_inside_the_range(tmp_path: Path, versions: dict, missing: str) -> None:
    project = _copy_project(PROJECT_DIR, tmp_path / "project")
    vendor_packages(project, versions)
    result = run_dbt(project, tmp_path, commands=("compile",))
    assert not result.ok
    assert missing in result.first_error


@pytest.mark.slow
def test_nondeterministic_fixture_differs_only_in_the_random_model(tmp_path: Path) -> None:
    prints = []
    for run in ("a", "b"):
        project = _copy_project(fixture_dir("nondeterministic"), tmp_path / run / "project")
        result = run_dbt(project, tmp_path / run)
        assert result.ok, result.first_error
        prints.append({t: _fingerprint(result.duckdb_path, t) for t in _table_counts(result.duckdb_path)})
    differing = {t for t in prints[0] if prints[0][t] != prints[1][t]}
    assert differing == {"sampled_readings"}
    assert "random()" in (fixture_dir("nondeterministic") / "models" / "sampled_readings.sql").read_text()


@pytest.mark.slow
@pytest.mark.skipif(not HAS_FAKETIME, reason="needs libfaketime (apt-get install faketime)")
def test_clock_fixture_follows_the_pinned_clock(tmp_path: Path) -> None:
    newest = max(
        value
        for csv_file in (fixture_dir("clock") / "seeds").glob("*.csv")
        for row in csv.DictReader(csv_file.open())
        for key, value in row.items()
        if key.endswith("_on")
    )
    assert newest == CLOCK_NEWEST_SEED_DATE
    project = _copy_project(fixture_dir("clock"), tmp_path / "project")
    result = run_dbt(project, tmp_path, faketime="@2024-07-01 08:00:00")
    assert result.ok, result.first_error
    con = duckdb.connect(str(result.duckdb_path), read_only=True)
    try:
        row = con.execute(
            "select days_as_member, days_since_last_visit from membership_age where member_id = 2"
        ).fetchone()
    finally:
        con.close()
    assert row == (839, 1)  # joined 2022-03-15, last visit 2024-06-30, today 2024-07-01


@pytest.mark.slow
def test_empty_outputs_fixture_builds_but_every_model_is_empty(tmp_path: Path) -> None:
    project = _copy_project(fixture_dir("empty_outputs"), tmp_path / "project")
    result = run_dbt(project, tmp_path)
    assert result.ok, result.first_error
    counts = _table_counts(result.duckdb_path)
    models = {p.stem for p in (project / "models").glob("*.sql")}
    assert len(models) == 3 and all(counts[m] == 0 for m in models)
    assert counts["raw_tickets"] == 8


@pytest.mark.slow
def test_build_fails_fixture_names_its_error(tmp_path: Path) -> None:
    project = _copy_project(fixture_dir("build_fails"), tmp_path / "project")
    result = run_dbt(project, tmp_path)
    assert not result.ok
    assert [s["command"] for s in result.steps] == ["seed", "build"]
    assert BUILD_FAILS_MARKER in result.first_error and "broken_totals" in result.first_error


def test_no_project_fixture_has_no_dbt_project() -> None:
    folder = fixture_dir("no_project")
    assert list(folder.rglob("*.sql")) and not list(folder.rglob("dbt_project.yml"))


@pytest.mark.slow
def test_fivetran_style_builds_only_in_the_declared_schema(tmp_path: Path) -> None:
    repo = _copy_project(fixture_dir("fivetran_style"), tmp_path / "repo")
    integration = repo / "integration_tests"
    declared = yaml.safe_load((integration / "dbt_project.yml").read_text())["vars"]
    assert declared == {"harvest_ledger_schema": FIVETRAN_SCHEMA}
    assert yaml.safe_load((integration / "packages.yml").read_text()) == {"packages": [{"local": "../"}]}
    assert (repo / "dbt_project.yml").is_file() and not (repo / "seeds").exists()
    shutil.copytree(
        repo, integration / "dbt_packages" / "harvest_ledger", ignore=shutil.ignore_patterns("integration_tests")
    )
    rows = {}
    for schema in (FIVETRAN_SCHEMA, "main"):
        work = tmp_path / schema
        work.mkdir()
        result = run_dbt(integration, work, schema=schema)
        assert result.ok, result.first_error
        rows[schema] = _table_counts(result.duckdb_path, schema)
    assert rows[FIVETRAN_SCHEMA]["harvest_ledger__account_balances"] == 5
    assert rows[FIVETRAN_SCHEMA]["stg_harvest_ledger__entries"] == 12
    # any other schema: sources are not found and every model silently comes out empty
    assert rows["main"]["ledger_entries"] == 12
    assert rows["main"]["harvest_ledger__account_balances"] == 0
    assert rows["main"]["stg_harvest_ledger__entries"] == 0


def test_missing_package_fixture_names_a_package_no_mirror_has() -> None:
    wanted = {
        p["package"]
        for p in yaml.safe_load((fixture_dir("uses_missing_package") / "packages.yml").read_text())["packages"]
    }
    assert MISSING_PACKAGE in wanted
    assert MISSING_PACKAGE not in example_packages()
    assert wanted - {MISSING_PACKAGE} <= set(example_packages())


@pytest.mark.slow
def test_lockfile_fixture_pins_older_versions_and_builds_with_them(tmp_path: Path) -> None:
    from dbt.config.project import package_config_from_data
    from dbt.task.deps import _create_sha1_hash

    folder = fixture_dir("with_lockfile")
    lock = yaml.safe_load((folder / "package-lock.yml").read_text())
    assert {p["name"]: str(p["version"]) for p in lock["packages"]} == LOCKED_VERSIONS
    declared = yaml.safe_load((folder / "packages.yml").read_text())
    expected_hash = _create_sha1_hash(
        package_config_from_data(copy.deepcopy(declared), copy.deepcopy(declared)).packages
    )
    assert lock["sha1_hash"] == expected_hash  # what `dbt deps` checks to trust the lock

    project = _copy_project(folder, tmp_path / "project")
    vendor_packages(project, {"shop_utils": "0.2.0", "shop_calendar": "v0.2.0"})
    result = run_dbt(project, tmp_path)
    assert result.ok, result.first_error
    con = duckdb.connect(str(result.duckdb_path), read_only=True)
    try:
        assert con.execute("select * from package_versions").fetchone() == ("0.2.0", "0.2.0")
    finally:
        con.close()


# ----------------------------------------------------------------------------- (c) business rules


def test_example_contains_every_business_rule() -> None:
    fct = _compact(_sql("models/marts/fct_orders.sql"))
    monthly = _compact(_sql("models/marts/customer_monthly_revenue.sql"))
    dim = _compact(_sql("models/marts/dim_customers.sql"))
    active = _compact(_sql("models/marts/active_customers.sql"))
    products = _compact(_sql("models/marts/product_performance.sql"))
    stg_orders = _compact(_sql("models/staging/stg_orders.sql"))
    stg_customers = _compact(_sql("models/staging/stg_customers.sql"))

    # status filter: only completed orders are revenue; only succeeded payments are collected
    assert "where status = 'completed'" in monthly and "where status = 'completed'" in active
    assert "where orders.status = 'completed'" in products
    assert "where payment_status = 'succeeded'" in fct
    # NULL is not FALSE
    assert "where customers.is_test_account is not true" in fct
    assert "where is_test_account is not true" in dim
    assert "coalesce(marketing_opt_in, false)" in stg_customers
    # aggregate at a declared grain (one row per customer per month), declared in the schema too
    assert "group by customer_id, revenue_month" in monthly
    marts_yml = yaml.safe_load((PROJECT_DIR / "models/marts/_marts.yml").read_text())
    monthly_yml = next(m for m in marts_yml["models"] if m["name"] == "customer_monthly_revenue")
    assert monthly_yml["data_tests"] == [
        {"shop_utils.unique_combination": {"arguments": {"columns": ["customer_id", "revenue_month"]}}}
    ]
    # joins: a multi-key LEFT JOIN, an inner join, a left join from a dimension
    assert re.search(
        r"left join monthly_payments on monthly_orders.customer_id = monthly_payments.customer_id "
        r"and monthly_orders.revenue_month = monthly_payments.payment_month",
        monthly,
    )
    assert "inner join customers on orders.customer_id = customers.customer_id" in fct
    assert "left join sales on products.product_id = sales.product_id" in products
    # time window relative to the current date
    assert "order_date >= current_date - interval 90 day" in active
    assert "'current_date'" in dim  # days_since_last_order counts to today
    # CASE expressions
    assert "case when orders.status = 'completed' then 'revenue'" in fct
    assert "case when order_history.customer_id is null then 'prospect'" in dim
    # count(distinct)
    for text in (fct, monthly, active, products):
        assert "count(distinct " in text
    # row_number() dedup: the latest version of each order
    assert "row_number() over ( partition by order_id order by updated_at desc )" in stg_orders
    assert "where version_rank = 1" in stg_orders


def test_example_uses_its_macro_and_a_macro_from_each_package() -> None:
    models = "\n".join(p.read_text() for p in (PROJECT_DIR / "models").rglob("*.sql"))
    assert "line_net_amount(" in models and (PROJECT_DIR / "macros" / "line_net_amount.sql").is_file()
    assert re.search(r"shop_utils\.\w+\(", models) and re.search(r"shop_calendar\.\w+\(", models)
    packages = yaml.safe_load((PROJECT_DIR / "packages.yml").read_text())["packages"]
    assert packages == [{"package": "harvestlabs/shop_utils", "version": [">=0.2.0", "<1.0.0"]}]
    transitive = yaml.safe_load(
        (PACKAGES_DIR / "shop_utils" / EXAMPLE_PACKAGE_VERSIONS["shop_utils"] / "packages.yml").read_text()
    )["packages"]
    assert transitive == [{"package": "harvestlabs/shop_calendar", "version": [">=0.2.0", "<0.3.0"]}]


def test_example_documents_every_model_and_column() -> None:
    documented = 0
    for yml in (PROJECT_DIR / "models").rglob("*.yml"):
        for model in yaml.safe_load(yml.read_text())["models"]:
            assert len(model.get("description", "")) > 40, model["name"]
            for column in model["columns"]:
                assert column.get("description"), f"{model['name']}.{column['name']}"
            documented += 1
    assert documented == len(list((PROJECT_DIR / "models").rglob("*.sql"))) == 10


def test_seed_columns_avoid_duckdb_reserved_words() -> None:
    con = duckdb.connect()
    reserved = {
        r[0]
        for r in con.execute(
            "select keyword_name from duckdb_keywords() where keyword_category = 'reserved'"
        ).fetchall()
    }
    con.close()
    seed_files = list(PROJECT_DIR.rglob("*.csv")) + list(PROJECTS.rglob("*.csv"))
    assert len(seed_files) >= 10
    for seed in seed_files:
        header = next(csv.reader(seed.open()))
        assert not reserved & {h.lower() for h in header}, seed


def test_example_seed_dates_are_in_2024() -> None:
    dates = [
        value[:10]
        for seed in (PROJECT_DIR / "seeds").glob("*.csv")
        for row in csv.DictReader(seed.open())
        for key, value in row.items()
        if value and (key.endswith(("_at", "_date")))
    ]
    assert len(dates) > 200
    assert min(dates) >= "2024-01-01" and max(dates) == "2024-12-27"
