"""Fixtures for the eval tests: hand-made repair tasks on the harvested example, in the dev (or test) split.

The tasks are written here (three silent bugs in the example's marts, each with its true fix and a wrong
repair), not minted, so these tests do not depend on the mutation engine; they use the session's
``example_harvest`` (the real sandboxed harvest of the embedded example) and copy its HARVEST_HOME.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.conftest import Harvested, use_env

FCT = "models/marts/fct_orders.sql"
ACTIVE = "models/marts/active_customers.sql"
# (family, operator, file, original line, broken line, wrong line, graded table)
EDITS = (
    (
        "filter",
        "drop_filter",
        FCT,
        "    where payment_status = 'succeeded'\n",
        "",
        "    where payment_status != 'failed'\n",
        "fct_orders",
    ),
    (
        "null",
        "is_not_true_to_eq_false",
        FCT,
        "where customers.is_test_account is not true\n",
        "where customers.is_test_account = false\n",
        "where not customers.is_test_account\n",
        "fct_orders",
    ),
    (
        "operator",
        "widen_in_list",
        ACTIVE,
        "    where status = 'completed'\n",
        "    where status in ('completed', 'shipped')\n",
        "    where status <> 'cancelled'\n",
        "active_customers",
    ),
)


@dataclass(frozen=True)
class EvalWorld:
    home: Path
    pins: Path
    pin: object
    tasks: list  # list[TaskRecord], sorted by id
    split: str

    def env(self):
        return use_env(self.home, self.pins)


def _columns(pin: object, table: str) -> tuple[int, ...]:
    for record in pin.tables:  # type: ignore[attr-defined]
        if record.name.split(".")[-1] == table:
            return tuple(range(len(record.columns)))
    raise AssertionError(f"the example's pin has no table {table}")


def make_tasks(harvested: Harvested, dest: Path, split: str, count: int = len(EDITS)) -> EvalWorld:
    """Copy the harvest, reserve its one repository for ``split``, write the hand-made tasks there."""
    from dbt_harvest.core.patching import make_patch
    from dbt_harvest.core.pin import list_pins, write_pin
    from dbt_harvest.core.scorer.spec import GradingSpec
    from dbt_harvest.core.task_record import LocalChecks, TaskRecord, task_id
    from dbt_harvest.corpora.groups import explain_groups
    from dbt_harvest.corpora.ledger import Params, assign, assignment_of
    from dbt_harvest.corpora.store import load_tasks, store_task
    from dbt_harvest.harvester.workspace import template

    home, pins = dest / "home", dest / "pins"
    shutil.copytree(harvested.home, home, symlinks=True)
    shutil.copytree(harvested.pins, pins)
    pin = harvested.pin
    with use_env(home, pins):
        groups = tuple(g.id for g in explain_groups(list_pins(pins)))
        # a second (never built) repository, so that a train group remains besides the reserved one
        other = replace(
            pin,
            id="other__train@" + pin.commit[:12],
            spec="other/train@" + pin.commit,
            url="https://example.invalid/other/train",
            root_commits=("f" * 40,),
            project_name="other_train",
            model_files={},
        )
        write_pin(other, pins)
        named = {
            "test": Params(test=0, dev=0, seed=0, test_groups=groups),
            "dev": Params(test=0, dev=0, seed=0, dev_groups=groups),
        }
        assign(pins, named[split])
        group = assignment_of(pin.id, pins).group
        tree = template(pin)
        for family, operator, file, original_line, broken_line, wrong_line, table in EDITS[:count]:
            original = (tree / file).read_text(encoding="utf-8")
            assert original.count(original_line) == 1, (file, original_line)
            broken = original.replace(original_line, broken_line)
            wrong = original.replace(original_line, wrong_line)
            broken_patch = make_patch(file, original, broken)
            slug = pin.id.split("@", 1)[0]
            record = TaskRecord(
                instance_id=task_id(slug, pin.commit, operator, file, broken_patch),
                pin=pin.id,
                repo=pin.spec.split("@", 1)[0],
                base_commit=pin.commit,
                project_dir=pin.project_dir,
                split=split,
                split_group=group,
                family=family,
                operator=operator,
                effect="rows or values change",
                file=file,
                broken_patch=broken_patch,
                fix_patch=make_patch(file, broken, original),
                wrong_repair_patches=(make_patch(file, broken, wrong),),
                grading=GradingSpec(
                    gold="", condition_tabs=(table,), condition_cols=(_columns(pin, table),), ignore_orders=(True,)
                ),
                problem_statement=f"The {table} model's numbers are wrong. Find the bug in the dbt project and fix it.",
                local_checks=LocalChecks(builds=True, tests_total=0, tests_failed=0),
                gold_sha256=pin.gold_sha256,
                license=pin.license,
                versions=dict(pin.versions),
            )
            store_task(record, home, pins)
        if split == "test":
            tasks: list = []  # sealed: readable only through an unseal
        else:
            tasks = load_tasks(split, home, pins, purpose="eval")
    return EvalWorld(home, pins, pin, tasks, split)


@pytest.fixture(scope="session")
def dev_world(example_harvest: Harvested, tmp_path_factory: pytest.TempPathFactory) -> EvalWorld:
    """Three hand-made tasks on the example, in the dev split."""
    return make_tasks(example_harvest, tmp_path_factory.mktemp("eval-dev"), "dev")


@pytest.fixture()
def test_world(example_harvest: Harvested, tmp_path: Path) -> EvalWorld:
    """The first task, sealed in the test split (a fresh copy per test: unseals are once per recipe)."""
    return make_tasks(example_harvest, tmp_path, "test", count=1)


TOY_PROJECT = """name: toy
profile: toy
model-paths: ["models", "extra_models"]
seed-paths: ["data"]
macro-paths: ["macros"]
test-paths: ["tests"]
"""


def toy_task(instance_id: str = "toy.task"):  # -> TaskRecord
    """A task record for the toy workspace (the state machine tests never build it)."""
    from dbt_harvest.core.scorer.spec import GradingSpec
    from dbt_harvest.core.task_record import LocalChecks, TaskRecord

    return TaskRecord(
        instance_id=instance_id,
        pin="toy@000000000000",
        repo="toy/toy",
        base_commit="0" * 40,
        project_dir=".",
        split="dev",
        split_group="toy",
        family="filter",
        operator="op",
        effect="",
        file="models/marts/orders.sql",
        broken_patch="x",
        fix_patch="x",
        wrong_repair_patches=(),
        problem_statement="fix it",
        grading=GradingSpec(gold="", condition_tabs=("orders",), condition_cols=((0,),), ignore_orders=(True,)),
        local_checks=LocalChecks(True, 0, 0),
        gold_sha256="0" * 64,
        license="MIT",
        versions={},
    )


@pytest.fixture()
def toy_ws(tmp_path: Path):  # -> TaskWorkspace
    """A small dbt project on disk with links and sandbox files planted; never built."""
    import os

    from dbt_harvest.eval.env.policy import policy_for
    from dbt_harvest.eval.env.workspace import TaskWorkspace

    root = tmp_path / "ws"
    for folder in (
        "models/marts",
        "extra_models",
        "data",
        "macros",
        "tests",
        "dbt_packages/pkg/models",
        "target",
        "analyses",
    ):
        (root / folder).mkdir(parents=True)
    (root / "dbt_project.yml").write_text(TOY_PROJECT)
    (root / "models/marts/orders.sql").write_text("select 1 as id\n")
    (root / "dbt_packages/pkg/models/p.sql").write_text("select 2\n")
    (root / ".harvest_profile").mkdir()
    (root / ".harvest_profile/profiles.yml").write_text("secret: profile\n")
    (root / "build.duckdb").write_bytes(b"\x00duck")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET-TOKEN\n")
    os.symlink(outside, root / "models/link_out")
    os.symlink(outside / "secret.txt", root / "models/secret.sql")
    return TaskWorkspace(
        root=root.resolve(),
        project_dir=".",
        profile="toy",
        schema="main",
        clock="2024-01-01",
        policy=policy_for(root, "."),
    )
