"""Distinguishing data (issue 16) on the ``gym_visits`` fixture: candidates its seeds cannot tell from the
original become kept tasks on an augmented pin, the augmentation is part of the pin and of every build,
the original project stays healthy on it, and an augmentation that breaks a dbt test is discarded.

Real dbt, DuckDB, git and sandbox throughout; the pure derivation is tested on its own at the end.
"""

from __future__ import annotations

import hashlib
import shutil
from typing import Any

import pytest

from tests.fixtures import fixture_repo

FAMILIES = ("null", "time")


@pytest.fixture(scope="module")
def gym(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """gym_visits pinned, reserved to train, minted (null and time) and then recovered with augmentation."""
    from dbt_harvest.core.home import harvest_home, pins_dir
    from dbt_harvest.corpora.ledger import Params, assign
    from dbt_harvest.corpora.store import load_tasks, mint_target
    from dbt_harvest.harvester.add import AddOptions, add
    from dbt_harvest.harvester.augment.run import recover
    from dbt_harvest.harvester.mint.pipeline import MintOptions, load_reports, mint
    from tests.conftest import use_env

    root = tmp_path_factory.mktemp("gym")
    repo = fixture_repo("gym_visits", root / "repo")
    home, pins = root / "home", root / "pins"
    with use_env(home, pins):
        base = add(f"{repo.path}@{repo.head}", AddOptions()).pin
        assign(pins, Params(test=0, dev=0, seed=0))
        options = MintOptions(families=FAMILIES, max_per_model=3)
        mint([base], options, mint_target(harvest_home(), pins_dir()))
        base_reports = load_reports(base.id)
        report = recover([base], options, mint_target(harvest_home(), pins_dir()))
        tasks = load_tasks("train", home, pins, purpose="inspect")
    return {
        "base": base,
        "base_reports": base_reports,
        "report": report,
        "tasks": tasks,
        "home": home,
        "pins": pins,
        "root": root,
        "env": lambda: use_env(home, pins),
    }


def _augmented(gym: dict[str, Any]):  # type: ignore[no-untyped-def]
    from dbt_harvest.core.pin import pin_path, read_pin

    kept = [a for a in gym["report"].augmentations if a.pin]
    assert len(kept) == 1, gym["report"].augmentations
    return read_pin(pin_path(kept[0].pin, gym["pins"]))


def test_equivalent_null_and_time_candidates_become_kept_tasks_on_augmented_data(gym) -> None:  # type: ignore[no-untyped-def]
    # on the fixture's own seeds nothing of either family is kept: the mutants are equivalent
    base = gym["base_reports"]
    assert not [r for r in base if r["kept"]]
    invisible = {r["family"] for r in base if r["reason"] == "equivalent"}
    assert invisible == {"null", "time"}
    # with the distinguishing rows both families keep tasks, minted on the augmented pin
    families = gym["report"].families
    assert families["null"]["recovered"] >= 1 and families["time"]["recovered"] >= 1, families
    pin = _augmented(gym)
    recovered = [t for t in gym["tasks"] if t.instance_id in gym["report"].kept_tasks]
    assert {t.family for t in recovered} == {"null", "time"}
    assert all(t.pin == pin.id and t.gold_sha256 == pin.gold_sha256 for t in recovered)
    # every task went through the same admission rules: an informative wrong repair, checked claims
    assert all(t.wrong_repair_patches and t.claims and not t.weak for t in recovered)
    # the statement speaks about outputs, never about the rows the harvester added
    for task in recovered:
        assert "seed" not in task.problem_statement.lower() and "added row" not in task.problem_statement.lower()


def test_the_augmentation_is_a_hashed_seed_patch_of_the_pin(gym) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.patching import parse_patch
    from dbt_harvest.core.pin import pin_path, read_pin

    pin, base = _augmented(gym), gym["base"]
    assert pin.augments == base.id and pin.commit == base.commit and pin.clock == base.clock
    patch = (gym["pins"] / "patches" / "augmentations" / f"{pin.augmentation_sha256}.diff").read_text()
    assert hashlib.sha256(patch.encode()).hexdigest() == pin.augmentation_sha256
    files = parse_patch(patch)
    assert {f.path for f in files} <= {"seeds/raw_members.csv", "seeds/raw_visits.csv"}
    added = [line for f in files for _, body in f.hunks for line in body if line.startswith("+")]
    removed = [line for f in files for _, body in f.hunks for line in body if line.startswith("-")]
    # the fewest rows: one per distinct condition (one NULL bonus, one visit per window edge) and, for the
    # time bounds, one visit outside both windows (removing the bound, the wrong repair, then differs
    # from the mutant); identical rows once, nothing removed
    assert not removed and 3 <= len(added) <= 6 and len(set(added)) == len(added)
    assert "+5,Ada,gold,,2023-01-10" in added  # a clone of a real member with a fresh key and no bonus
    # the pin reads back (digest over the new fields), the base pin is untouched
    assert read_pin(pin_path(pin.id, gym["pins"])) == pin
    assert not read_pin(pin_path(base.id, gym["pins"])).augmentation_sha256


@pytest.mark.deep(
    covered_by=(
        "tests/harvester/test_augment.py::test_a_tampered_augmentation_is_refused",
        "tests/harvester/test_augment_lineage.py::test_one_augmentation_of_all_derived_rows_keeps_the_original_project_healthy",
        "tests/harvester/test_reach.py::test_tasks_verify_rebuilds_a_task_with_the_known_failures_left_out",
        "tests/harvester/test_history.py::test_tasks_verify_rebuilds_the_history_task_fresh",
    )
)
def test_augmented_tasks_reverify_from_a_fresh_build_and_the_project_stays_healthy(gym) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.home import template_dir
    from dbt_harvest.harvester.build import build_workspace
    from dbt_harvest.harvester.discovery import discover
    from dbt_harvest.harvester.verify import verify
    from dbt_harvest.harvester.workspace import fresh_workspace

    pin = _augmented(gym)
    with gym["env"]():
        shutil.rmtree(template_dir(pin.id))  # rebuilt from git + compat + augmentation patch
        workspace = fresh_workspace(pin, gym["root"] / "fresh")
        members = (workspace / "seeds/raw_members.csv").read_text()
        assert "5,Ada,gold,,2023-01-10" in members
        project = discover(workspace, pin.project_dir)
        built = build_workspace(
            workspace, project.rel_dir, project.profile, project.schema, pin.clock, log_path=gym["root"] / "fresh.log"
        )
        assert built.models_ok and built.tests_total >= 8 and built.tests_failed == 0
        recovered = [t for t in gym["tasks"] if t.instance_id in gym["report"].kept_tasks]
        # one task of each family the augmentation recovered (every kept task passed the same confirmation)
        sample = list({t.family: t for t in sorted(recovered, key=lambda t: t.instance_id)}.values())
        assert {t.family for t in sample} == set(FAMILIES)
        verdicts = verify(sample)
    assert len(verdicts) == len(FAMILIES) and all(v.ok for v in verdicts), [
        (v.instance_id, [c for c in v.checks if not c.ok]) for v in verdicts
    ]


def test_a_tampered_augmentation_is_refused(gym) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.errors import PinError
    from dbt_harvest.harvester.workspace import populate

    pin = _augmented(gym)
    patch = (gym["pins"] / "patches" / "augmentations" / f"{pin.augmentation_sha256}.diff").read_text()
    with gym["env"](), pytest.raises(PinError, match="augmentation patch does not match"):
        populate(pin, gym["root"] / "tampered", "", augment_text=patch.replace(",,", ",0,"))


def test_an_augmentation_that_breaks_a_dbt_test_is_discarded(gym) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.core.pin import list_pins
    from dbt_harvest.harvester.augment.derive import SeedRow, render
    from dbt_harvest.harvester.augment.run import AugmentRejected, _seeds_of, augmented_pin

    base = gym["base"]
    with gym["env"]():
        before = {p.id for p in list_pins(gym["pins"])}
        seeds = _seeds_of(base)
        # a member without a name: stg_members.member_name is not_null-tested
        patch, written = render(seeds, [SeedRow("raw_members", 0, (("member_name", ""),))])
        with pytest.raises(AugmentRejected) as caught:
            augmented_pin(base, patch, len(written))
        assert caught.value.reason == "dbt_test_fails", caught.value
        # a visit of a member who does not exist would break the relationships test the same way
        patch, written = render(seeds, [SeedRow("raw_visits", 0, (("member_id", "99"),))])
        with pytest.raises(AugmentRejected) as caught:
            augmented_pin(base, patch, len(written))
        assert caught.value.reason == "dbt_test_fails", caught.value
        assert {p.id for p in list_pins(gym["pins"])} == before


# --- the pure part -------------------------------------------------------------------------------------------


def _seed(name: str, text: str):  # type: ignore[no-untyped-def]
    from dbt_harvest.harvester.augment.derive import SeedTable

    return SeedTable.parse(name, f"seeds/{name}.csv", text)


def test_rows_are_clones_with_fresh_keys_and_identical_rows_are_added_once() -> None:
    from dbt_harvest.harvester.augment.derive import SeedRow, key_columns, render

    seed = _seed("accounts", "id,owner_id,status\n7,1,open\n9,1,closed\n")
    assert key_columns(seed) == (0,)  # owner_id repeats: a foreign key, kept as the clone has it
    row = SeedRow("accounts", 1, (("status", ""),))
    patch, written = render({"accounts": seed}, [row, row, SeedRow("accounts", 0, (("owner_id", "2"),))])
    assert written == (("accounts", ("10", "1", "")), ("accounts", ("11", "2", "open")))
    body = patch.split("@@", 2)[2].splitlines()
    assert [line for line in body if line and line[0] in "+-"] == ["+10,1,", "+11,2,open"]


def test_a_time_condition_is_found_at_the_window_edge_relative_to_the_clock() -> None:
    from dbt_harvest.harvester.augment.derive import NoProposal, propose
    from dbt_harvest.harvester.augment.run import time_probe

    seeds = (_seed("visits", "visit_id,visited_on\n1,2024-05-30\n"),)
    sql = "select * from v where visited_on >= current_date - interval 30 day"
    mutated = sql.replace("30 day", "31 day")
    probe = time_probe("2024-05-31 00:00:00")
    got = propose("k", "time", "time.interval_amount", "30", "31", sql, mutated, seeds, frozenset({"visits"}), probe)
    assert got.row.values == (("visited_on", "2024-04-30"),)  # inside the mutant's window only
    flipped = sql.replace(">=", ">")
    got = propose("k", "time", "time.boundary", ">=", ">", sql, flipped, seeds, frozenset(), probe)
    assert got.row.values == (("visited_on", "2024-05-01"),)  # exactly on the bound
    with pytest.raises(NoProposal, match="no seed holds"):
        propose(
            "k",
            "time",
            "time.boundary",
            ">=",
            ">",
            sql.replace("visited_on", "left_on"),
            flipped.replace("visited_on", "left_on"),
            seeds,
            frozenset(),
            probe,
        )


def test_a_null_condition_names_the_column_the_node_reads() -> None:
    from dbt_harvest.harvester.augment.derive import NoProposal, propose

    seeds = (_seed("members", "member_id,bonus\n1,5\n"), _seed("other", "x,bonus\n1,2\n"))
    got = propose(
        "k",
        "null",
        "null.drop_coalesce_default",
        "coalesce(bonus, 0)",
        "bonus",
        "",
        "",
        seeds,
        frozenset({"members"}),
        lambda *a: None,
    )
    assert got.row == got.row.__class__("members", 0, (("bonus", ""),)) and got.condition == "bonus is NULL"
    with pytest.raises(NoProposal):
        propose(
            "k",
            "null",
            "null.count_star_to_column",
            "count(*)",
            "count(nothing_here)",
            "",
            "",
            seeds,
            frozenset(),
            lambda *a: None,
        )


def test_pins_without_augmentation_read_back_byte_for_byte_and_half_records_are_refused() -> None:
    import tomllib

    from dbt_harvest.core.errors import PinError
    from dbt_harvest.core.pin import Pin, pin_from_dict

    pin = Pin(
        id="o__r@" + "a" * 12,
        spec="o/r@x",
        url="https://github.com/o/r",
        commit="a" * 40,
        tree="b" * 40,
        ref="",
        root_commits=(),
        project_dir="",
        project_name="r",
        profile_schema="main",
        clock="2024-01-01 00:00:00",
        license="MIT",
        created_at="",
        gold_sha256="c" * 64,
        compat_patch_sha256="",
        versions={},
        packages=(),
        tables=(),
    )
    assert "augment" not in pin.to_toml()
    data = tomllib.loads(pin.to_toml())
    data.pop("digest")
    data["augmentation_sha256"] = "d" * 64
    with pytest.raises(PinError, match="go together"):
        pin_from_dict(data)
    data["augments"] = pin.id
    assert pin_from_dict(data).augmentation_sha256 == "d" * 64


def test_a_filter_value_condition_tries_the_literals_of_the_comparison() -> None:
    from dbt_harvest.harvester.augment.derive import propose
    from dbt_harvest.harvester.augment.run import time_probe

    seeds = (_seed("orders", "order_id,status,amount\n1,shipped,10\n"),)
    probe = time_probe("2024-05-31 00:00:00")
    sql = "select * from o where status = 'returned'"
    got = propose(
        "k",
        "filter",
        "filter.change_literal",
        "'returned'",
        "'Returned'",
        sql,
        sql.replace("'returned'", "'Returned'"),
        seeds,
        frozenset({"orders"}),
        probe,
    )
    assert got.row.values == (("status", "returned"),) and got.condition == "status = returned"
    sql = "select * from o where amount > 100"
    got = propose(
        "k", "filter", "filter.flip_strictness", ">", ">=", sql, sql.replace(">", ">="), seeds, frozenset(), probe
    )
    assert got.row.values == (("amount", "100"),)  # on the bound: kept by >= only
    sql = "select * from o where status in ('lost', 'returned')"
    got = propose(
        "k",
        "filter",
        "filter.drop_in_element",
        "'lost', ",
        "",
        sql,
        sql.replace("'lost', ", ""),
        seeds,
        frozenset(),
        probe,
    )
    assert got.row.values == (("status", "lost"),)


def test_cli_mint_augment_reports_the_augmentation_and_redoes_nothing(gym) -> None:  # type: ignore[no-untyped-def]
    import json

    from click.testing import CliRunner

    from dbt_harvest.cli import main

    with gym["env"]():
        result = CliRunner().invoke(main, ["mint", gym["base"].id, "--families", "null,time", "--augment", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    augmentation = data["augmentation"]
    # the same augmentation (the pin exists: nothing rebuilt), and its candidates were decided already
    assert [a["pin"] for a in augmentation["augmentations"]] == [_augmented(gym).id]
    assert augmentation["families"]["null"]["invisible"] == 1 and augmentation["kept_tasks"] == []
    assert data["this_run"]["candidates"] == 0


def test_join_and_grain_conditions_an_unmatched_key_and_a_twin_row() -> None:
    from dbt_harvest.harvester.augment.derive import NoProposal, SeedRow, propose, render

    seeds = {
        "orders": _seed("orders", "order_id,customer_id\n1,7\n2,8\n"),
        "customers": _seed("customers", "customer_id,name\n7,Ann\n8,Bo\n"),
    }
    sql = "select o.order_id, c.name from orders o left join customers c on o.customer_id = c.customer_id"
    got = propose(
        "k",
        "join",
        "join.left_to_inner",
        "left join",
        "join",
        sql,
        sql.replace("left join", "join"),
        tuple(seeds.values()),
        frozenset({"orders", "customers"}),
        lambda *a: None,
    )
    # an order of a customer nobody has: LEFT keeps it, INNER drops it
    assert got.row.seed == "orders" and got.row.values == (("customer_id", "9"),)
    with pytest.raises(NoProposal, match="no derivation"):
        propose("k", "join", "join.drop_on_key", "", "", sql, sql, tuple(seeds.values()), frozenset(), lambda *a: None)
    got = propose(
        "k",
        "grain",
        "grain.count_distinct_to_count",
        "count(distinct customer_id)",
        "count(customer_id)",
        "",
        "",
        tuple(seeds.values()),
        frozenset({"orders"}),
        lambda *a: None,
    )
    assert got.row == SeedRow("orders", 0, ())
    _, written = render(seeds, [got.row])
    assert written == (("orders", ("3", "7")),)  # a twin of order 1 under a fresh key


def test_a_dataset_row_flags_and_carries_the_augmentation(gym) -> None:  # type: ignore[no-untyped-def]
    from dbt_harvest.corpora.features import to_row
    from dbt_harvest.corpora.materialize import row_pin, row_source
    from dbt_harvest.harvester.workspace import augmentation_text, compat_patch_text

    pin = _augmented(gym)
    task = next(t for t in gym["tasks"] if t.instance_id in gym["report"].kept_tasks)
    with gym["env"]():
        patch = augmentation_text(pin)
        row = to_row(task, pin, compat_patch_text(pin), patch)
        with pytest.raises(ValueError, match="augmentation patch text"):
            to_row(task, pin, compat_patch_text(pin), patch + " ")
    assert row["augmented"] is True and row["augmentation_patch"] == patch
    rebuilt = row_pin(row)  # what `harvest tasks materialize` and the environment rebuild from
    assert (rebuilt.augmentation_sha256, rebuilt.augments) == (pin.augmentation_sha256, gym["base"].id)
    assert row_source(row, None).augment_text == patch


@pytest.mark.deep(
    covered_by=(
        "tests/harvester/test_augment.py::test_cli_mint_augment_reports_the_augmentation_and_redoes_nothing",
        "tests/cli/test_mint_lock.py::test_a_fresh_budgeted_mint_resumed_until_done_reproduces_the_lock_and_a_changed_lock_fails",
    )
)
def test_a_committed_augmented_pin_is_derived_again_in_a_fresh_home_and_reproduces_the_lock(gym, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The corpus chain: an augmentation made in one home is committed with the pins (the pin records the
    candidates it serves; its seed patch, rows cloned from the repository's seeds, is not committed) and
    locked. A fresh home re-adds only the base pin: a plain mint leaves the augmented pin waiting (named,
    and reported unfinished by the lock check); ``--augment`` derives the same patch again, builds the pin to the
    gold it records, mints exactly its recorded candidates and reproduces the lock task for task. A pin
    whose rebuilt gold differs is refused."""
    import json
    from dataclasses import replace

    from click.testing import CliRunner

    from dbt_harvest.cli import main
    from dbt_harvest.core import atomic
    from dbt_harvest.core.pin import pin_path, read_pin, write_pin
    from dbt_harvest.harvester.add import AddOptions, add
    from dbt_harvest.harvester.augment.run import AugmentOptions, AugmentRebuildError, built_here, rebuild_augmented
    from dbt_harvest.harvester.mint.pipeline import load_reports
    from dbt_harvest.harvester.workspace import augmentation_path
    from tests.conftest import use_env

    pin, base = _augmented(gym), gym["base"]
    made = next(a for a in gym["report"].augmentations if a.pin == pin.id)
    assert pin.recovers and {key for _, key in pin.recovers} == set(made.keys)
    pins = tmp_path / "pins"
    shutil.copytree(gym["pins"], pins)
    with use_env(gym["home"], pins):
        locked = CliRunner().invoke(main, ["corpus", "lock", "--json"])
    assert locked.exit_code == 0, locked.output
    recovered = set(gym["report"].kept_tasks)
    assert recovered and all(task_id in (pins / "_tasks.lock").read_text() for task_id in recovered)
    shutil.rmtree(pins / "patches" / "augmentations")  # what a clone of the corpus holds

    families = ["--families", ",".join(FAMILIES)]
    with use_env(tmp_path / "fresh-home", pins):
        assert add(f"{gym['root'] / 'repo'}@{base.commit}", AddOptions(rebuild=True)).pin == base
        assert not built_here(pin)
        plain = CliRunner().invoke(main, ["mint", "--all", *families, "--verify-lock", "--json"])
        assert plain.exit_code == 0 and "wait for `--augment`" in plain.stderr, plain.output
        lock = json.loads(plain.stdout)["lock"]  # a partial rebuild: the waiting pin's tasks are not reached yet
        assert lock["unfinished"] == [pin.id] and "not yet reached" in lock["summary"]
        assert not built_here(pin)
        result = CliRunner().invoke(main, ["mint", "--all", *families, "--augment", "--verify-lock", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["lock"]["same"]
        assert built_here(pin) and augmentation_path(pin.augmentation_sha256).is_file()
        tried = {r["key"] for r in load_reports(pin.id)}
        assert tried and tried <= {key for _, key in pin.recovers}

        # a pin that records another gold and other tables is refused, nothing installed
        table = replace(pin.tables[0], fingerprint="0" * 32)
        other = replace(
            pin, id=pin.id.replace("+aug-", "+aug-0"), gold_sha256="0" * 64, tables=(table, *pin.tables[1:])
        )
        write_pin(other, pins)
        with pytest.raises(AugmentRebuildError, match="not the 000000000000.*tables differ"):
            rebuild_augmented(other)
        assert not built_here(other)
        # the same tables under another name (a pin named by its gold file's bytes, which did not reproduce):
        # the gold goes in under its content name and the pin is rewritten with that name, nothing else
        legacy = replace(pin, id=pin.id.replace("+aug-", "+aug-1"), gold_sha256="1" * 64)
        write_pin(legacy, pins)
        renamed = rebuild_augmented(legacy)
        assert renamed == replace(legacy, gold_sha256=pin.gold_sha256) and built_here(renamed)
        assert read_pin(pin_path(legacy.id, pins)).gold_sha256 == pin.gold_sha256
        # named by its file's bytes, moved on purpose (`harvest mint --rename-gold`) whether or not they reproduce
        by_bytes = atomic.sha256_file(tmp_path / "fresh-home" / "gold" / f"{pin.gold_sha256}.duckdb")
        named = replace(pin, id=pin.id.replace("+aug-", "+aug-2"), gold_sha256=by_bytes)
        write_pin(named, pins)
        assert rebuild_augmented(named, AugmentOptions(rename_gold=True)).gold_sha256 == pin.gold_sha256
