"""Test world for corpora: real pins (from real pygit2 repositories), real task records, real gold files.

Pins and TaskRecords are the plain records `harvest add` and `harvest mint` write; here they are built
directly from small original git repositories made at test time, and written with the real writers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pygit2
import pytest

from dbt_harvest.core import atomic
from dbt_harvest.core.pin import Column, PackageRecord, Pin, TableRecord, write_pin
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import LocalChecks, TaskRecord, task_id

SIG = pygit2.Signature("Fixture", "fixture@example.invalid", 1_700_000_000, 0)
PROBLEMS = [
    "Monthly revenue per customer looks too high after the last change; finance says refunds seem counted twice somewhere.",
    "The active subscriptions dashboard lost every account created on the first day of each month since yesterday.",
    "Order counts by region disagree with the warehouse export; a few regions show zero orders although shipments exist.",
    "Average session length jumped overnight; analysts suspect sessions without an end event are now included.",
    "Churned customers reappear as active in the retention table whenever their last invoice was fully discounted.",
    "Inventory on hand is negative for several products, which should be impossible given the receiving logs.",
    "Lifetime value per cohort shrank by about half for cohorts that started in leap years only.",
    "The marketing attribution model credits campaigns that ended before the visit happened to the visitor.",
    "Payroll totals for contractors include people whose contracts were terminated in the prior quarter.",
    "Support ticket resolution times are negative for tickets reopened after being closed by automation.",
    "Fleet utilisation reports count vehicles in the repair shop as available for dispatch on weekends.",
    "Subscription upgrades are booked as new customers in the growth report instead of expansions.",
    "Store footfall per hour is shifted by one hour for every location east of the head office.",
    "Loan balances ignore partial repayments made on the same day the loan was disbursed to the borrower.",
]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def make_repo(
    path: Path, files: dict[str, str], parent_repo: Path | None = None, message: str = "init"
) -> pygit2.Repository:
    """A real git repository: a fresh one, or a clone of ``parent_repo`` (a fork) with one more commit."""
    if parent_repo is not None:
        repo = pygit2.clone_repository(str(parent_repo), str(path))
    else:
        repo = pygit2.init_repository(str(path), initial_head="main")
    for rel, text in files.items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    parents = [] if repo.head_is_unborn else [repo.head.target]
    repo.create_commit("HEAD", SIG, SIG, message, tree, parents)
    return repo


def roots_of(repo: pygit2.Repository) -> tuple[str, ...]:
    return tuple(sorted(str(c.id) for c in repo.walk(repo.head.target) if not c.parents))


def model_files_of(path: Path) -> dict[str, str]:
    return {p.relative_to(path).as_posix(): atomic.sha256_file(p) for p in sorted(path.rglob("models/*.sql"))}


def pin_of_repo(
    repo: pygit2.Repository,
    url: str,
    project_name: str,
    *,
    license: str = "MIT",
    packages: tuple[PackageRecord, ...] = (),
    gold_sha256: str | None = None,
) -> Pin:
    workdir = Path(repo.workdir)
    commit = str(repo.head.target)
    slug = url.rstrip("/").split("github.com/")[-1].replace("/", "__")
    return Pin(
        id=f"{slug}@{commit[:12]}",
        spec=f"{url}@{commit}",
        url=url,
        commit=commit,
        tree=str(repo[repo.head.target].tree_id),
        ref="main",
        root_commits=roots_of(repo),
        project_dir=".",
        project_name=project_name,
        profile_schema="main",
        clock="2024-01-01T00:00:00",
        license=license,
        created_at="2024-01-01T00:00:00Z",
        gold_sha256=gold_sha256 or sha(url),
        compat_patch_sha256="",
        versions={"dbt-core": "1.11.16", "duckdb": "1.5.6"},
        packages=packages,
        tables=(TableRecord("main.orders", 3, "f" * 16, True, False, (Column("id", "INTEGER"),), "model.x.orders"),),
        model_files=model_files_of(workdir),
    )


def hub(pkg: str, url: str = "") -> PackageRecord:
    return PackageRecord(
        name=pkg.split("/")[-1], source=f"hub:{pkg}", requested=">=0.1.0", version="0.1.0", commit="a" * 40, url=url
    )


def make_task(
    pin: Pin,
    split: str,
    group: str,
    n: int,
    *,
    statement: str | None = None,
    gold_sha256: str | None = None,
    license: str | None = None,
) -> TaskRecord:
    broken = f"--- a/models/m{n}.sql\n+++ b/models/m{n}.sql\n@@ -1 +1 @@\n-select {n} as id\n+select {n + 1} as id\n"
    fix = f"--- a/models/m{n}.sql\n+++ b/models/m{n}.sql\n@@ -1 +1 @@\n-select {n + 1} as id\n+select {n} as id\n"
    slug = pin.id.split("@")[0]
    return TaskRecord(
        instance_id=task_id(slug, pin.commit, "flip_literal", f"models/m{n}.sql", broken),
        pin=pin.id,
        repo=pin.url.split("github.com/")[-1],
        base_commit=pin.commit,
        project_dir=".",
        split=split,
        split_group=group,
        family="literal",
        operator="flip_literal",
        effect="wrong values",
        file=f"models/m{n}.sql",
        broken_patch=broken,
        fix_patch=fix,
        wrong_repair_patches=(f"WRONG-REPAIR-SECRET-{n}\n",),
        grading=GradingSpec(
            gold="gold.duckdb", condition_tabs=("orders",), condition_cols=((0, 1),), ignore_orders=(True,)
        ),
        problem_statement=statement or PROBLEMS[n % len(PROBLEMS)] + f" (case {pin.id} {n})",
        local_checks=LocalChecks(builds=True, tests_total=4, tests_failed=0),
        gold_sha256=gold_sha256 or pin.gold_sha256,
        license=license or pin.license,
        versions={"dbt-core": "1.11.16", "duckdb": "1.5.6"},
    )


def make_gold(home: Path, label: str) -> str:
    """A real DuckDB gold file in HARVEST_HOME/gold/<sha256>.duckdb; returns its sha256."""
    scratch = home / "scratch" / f"{label}.duckdb"
    scratch.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(scratch))
    con.execute("create table orders as select * from (values (1, 'a'), (2, ?)) t(id, name)", [label])
    con.close()
    digest = atomic.sha256_file(scratch)
    atomic.install_file(scratch, home / "gold" / f"{digest}.duckdb")
    return digest


@dataclass
class World:
    root: Path
    pins: Path
    home: Path
    repos: dict[str, Pin] = field(default_factory=dict)

    def add_repo(
        self,
        name: str,
        *,
        files: dict[str, str] | None = None,
        fork_of: str | None = None,
        project_name: str | None = None,
        license: str = "MIT",
        packages: tuple[PackageRecord, ...] = (),
        url: str | None = None,
    ) -> Pin:
        path = self.root / "repos" / name.replace("/", "__")
        parent = self.root / "repos" / fork_of.replace("/", "__") if fork_of else None
        files = (
            files
            if files is not None
            else {
                "dbt_project.yml": f"name: {name.split('/')[-1]}\n",
                "models/orders.sql": f"-- {name}\nselect 1 as id\n",
            }
        )
        repo = make_repo(path, files, parent_repo=parent, message=f"{name} commit")
        gold = make_gold(self.home, name)
        pin = pin_of_repo(
            repo,
            url or f"https://github.com/{name}",
            project_name or name.split("/")[-1].replace("-", "_"),
            license=license,
            packages=packages,
            gold_sha256=gold,
        )
        write_pin(pin, self.pins)
        self.repos[name] = pin
        return pin


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    pins, home = tmp_path / "pins", tmp_path / "home"
    pins.mkdir()
    home.mkdir()
    monkeypatch.setenv("HARVEST_PINS", str(pins))
    monkeypatch.setenv("HARVEST_HOME", str(home))
    return World(root=tmp_path, pins=pins, home=home)


@pytest.fixture
def make(world: World) -> Callable[..., Pin]:
    return world.add_repo


@pytest.fixture
def reserved(world, make):
    """Three repos reserved test/dev/train, two tasks each, stored through the real store (store_task)."""
    from dbt_harvest.corpora.ledger import Params, assign, group_of
    from dbt_harvest.corpora.store import store_task

    pins = {name: make(name) for name in ("t/testrepo", "d/devrepo", "r/trainrepo")}
    assign(world.pins, Params(0, 0, 0, test_groups=("t/testrepo",), dev_groups=("d/devrepo",)))
    tasks = {}
    for split, name in (("test", "t/testrepo"), ("dev", "d/devrepo"), ("train", "r/trainrepo")):
        pin = pins[name]
        tasks[split] = [make_task(pin, split, group_of(pin.id, world.pins), n) for n in (1, 2)]
        for t in tasks[split]:
            store_task(t, world.home, world.pins)
    return pins, tasks
