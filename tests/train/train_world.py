"""A small, original plain-SQL dbt project turned into a repair task, for the training tests.

The project (a shop's paid revenue per customer) is written here, committed into a local git
repository with pygit2, broken by one business-rule edit (shipped orders stop counting as paid), and
given a gold DuckDB file built from the ORIGINAL models, plus an inputs database with the raw table.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from dbt_harvest.core.patching import make_patch
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import LocalChecks, TaskRecord, task_id, write_task
from dbt_harvest.harvester.gitrepos import make_git_repo
from dbt_harvest.harvester.gold import install_gold
from dbt_harvest.train.sql_backend import compile_models

PIN = "acme__shop@" + "0" * 12

STG = "select order_id, customer_id, status, amount\nfrom {{ source('raw', 'raw_orders') }}\n"
REVENUE_OK = (
    "select customer_id, sum(amount) as revenue, count(*) as paid_orders\n"
    "from {{ ref('stg_orders') }}\n"
    "where status in ('paid', 'shipped')\n"
    "group by customer_id\n"
)
REVENUE_BROKEN = REVENUE_OK.replace("('paid', 'shipped')", "('paid')")
REVENUE_WRONG = REVENUE_OK.replace("('paid', 'shipped')", "('paid', 'shipped', 'returned')")
SCHEMA = (
    "version: 2\nmodels:\n  - name: paid_revenue\n    description: revenue of paid or shipped orders per customer\n"
    "    columns:\n      - name: customer_id\n        tests: [unique, not_null]\n"
)
FILES = {
    "dbt_project.yml": "name: shop\nversion: '1.0'\nprofile: shop\n",
    "models/stg_orders.sql": STG,
    "models/paid_revenue.sql": REVENUE_OK,
    "models/schema.yml": SCHEMA,
}
RAW = [
    (1, 10, "paid", 20.0),
    (2, 10, "shipped", 5.0),
    (3, 11, "paid", 7.5),
    (4, 11, "returned", 3.0),
    (5, 12, "shipped", 12.0),
    (6, 12, "placed", 1.0),
]


@dataclass(frozen=True)
class World:
    home: Path
    repos: Path
    inputs: Path
    tasks_dir: Path
    task: TaskRecord


def _raw_db(path: Path) -> None:
    con = duckdb.connect(str(path))
    con.execute("create table raw_orders (order_id integer, customer_id integer, status varchar, amount double)")
    con.executemany("insert into raw_orders values (?, ?, ?, ?)", RAW)
    con.close()


def build_world(root: Path) -> World:
    """Write the repo, inputs, gold and one train task under ``root`` (HARVEST_HOME must be root/home)."""
    home, repos, inputs, tasks_dir = root / "home", root / "repos", root / "inputs", root / "tasks"
    for folder in (home, repos, inputs, tasks_dir):
        folder.mkdir(parents=True, exist_ok=True)
    src = root / "src"
    for rel, text in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    repo = make_git_repo(src, repos / "acme__shop", bare=True)
    _raw_db(inputs / f"{PIN}.duckdb")
    gold_tmp = root / "gold-build.duckdb"
    _raw_db(gold_tmp)
    con = duckdb.connect(str(gold_tmp))
    for name, sql in compile_models(FILES, ""):
        con.execute(f"create table {name} as {sql}")
    con.execute("drop table raw_orders")
    con.close()
    gold_sha = install_gold(gold_tmp)
    broken_patch = make_patch("models/paid_revenue.sql", REVENUE_OK, REVENUE_BROKEN)
    task = TaskRecord(
        instance_id=task_id("acme__shop", repo.head, "in_list_drop", "models/paid_revenue.sql", broken_patch),
        pin=PIN,
        repo="acme/shop",
        base_commit=repo.head,
        project_dir="",
        split="train",
        split_group="acme",
        family="filters",
        operator="in_list_drop",
        effect="shipped orders no longer count as paid",
        file="models/paid_revenue.sql",
        broken_patch=broken_patch,
        fix_patch=make_patch("models/paid_revenue.sql", REVENUE_BROKEN, REVENUE_OK),
        wrong_repair_patches=(make_patch("models/paid_revenue.sql", REVENUE_BROKEN, REVENUE_WRONG),),
        grading=GradingSpec(
            gold=f"{gold_sha}.duckdb",
            condition_tabs=("paid_revenue",),
            condition_cols=((0, 1, 2),),
            ignore_orders=(True,),
        ),
        problem_statement="Revenue per customer looks too low: shipped orders are paid too. Fix the model.",
        local_checks=LocalChecks(builds=True, tests_total=2, tests_failed=0),
        gold_sha256=gold_sha,
        license="Apache-2.0",
        versions={"duckdb": duckdb.__version__},
    )
    write_task(task, tasks_dir)
    return World(home, repos, inputs, tasks_dir, task)


def other_split(task: TaskRecord, split: str) -> TaskRecord:
    return dataclasses.replace(task, split=split, instance_id=task.instance_id + f".{split}")


CONFIGS = Path(__file__).parent / "configs"


def tiny_raw(name: str, world: World, out: Path, **sections: dict[str, Any]) -> dict[str, Any]:
    """A tiny test config as a dict, pointed at ``world`` and writing under ``out``."""
    raw = tomllib.loads((CONFIGS / name).read_text())
    raw["run"]["output_dir"] = str(out)
    raw["data"] = {**raw.get("data", {}), "tasks": str(world.tasks_dir), "repos": str(world.repos)}
    if "reward" in raw:
        raw["reward"]["inputs"] = str(world.inputs)
    for section, values in sections.items():
        raw[section] = {**raw.get(section, {}), **values}
    return raw


def write_config(raw: dict[str, Any], path: Path) -> Path:
    import tomli_w

    path.write_text(tomli_w.dumps(raw))
    return path
