"""Completion tasks end to end on the embedded example (real sandboxed builds, every stage through its CLI):
`harvest mint --kinds completion` after the repair mint (one model, and a model with a parent), its resume and
the lock; `harvest tasks verify` in fresh builds; the audit (oracle, noop: a missing model is graded by dbt);
SFT rows and the GRPO reward; the dataset, `tasks materialize` and `score --task` on an empty home; `export spider2`.
One mint of both kinds, `tasks verify` and the audit are second paths, in the deep tier (tests/tiers.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from dbt_harvest.cli import main
from dbt_harvest.core.closing import completion_closing
from dbt_harvest.core.patching import apply_to_text, parse_patch

pytestmark = pytest.mark.slow

MARTS = {
    "models/marts/fct_orders.sql",
    "models/marts/dim_customers.sql",
    "models/marts/customer_monthly_revenue.sql",
    "models/marts/active_customers.sql",
    "models/marts/product_performance.sql",
}


def _run(home: Path, pins: Path, *args: str, progress_every: bool = False) -> tuple[int, str, str]:
    """``harvest ARGS`` in ``home``: (exit code, stdout, stderr); ``progress_every``: a progress line per update."""
    env = {"HARVEST_HOME": str(home), "HARVEST_PINS": str(pins)}
    if progress_every:
        env["HARVEST_PROGRESS_INTERVAL"] = "0"
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def _json(home: Path, pins: Path, *args: str) -> dict:
    code, out, err = _run(home, pins, *args, "--json")
    assert code == 0, (args, err[-3000:], out[-2000:])
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def completed(minted_example, tmp_path_factory):
    """The minted example (repairs) with its completion tasks minted on top, in a home of the module's own."""
    from dbt_harvest.corpora.store import load_tasks
    from dbt_harvest.harvester.workspace import template

    root = tmp_path_factory.mktemp("completed")
    home, pins = root / "home", root / "pins"
    shutil.copytree(minted_example.home, home, symlinks=True)
    shutil.copytree(minted_example.pins, pins)
    # piped progress, a line per update (test_a_json_mint_prints_one_object_and_its_progress_counts_per_kind)
    code, out, err = _run(
        home, pins, "mint", minted_example.pin.id, "--kinds", "completion", "--json", progress_every=True
    )
    assert code == 0, err[-3000:]
    summary = json.loads(out)
    from tests.conftest import use_env

    with use_env(home, pins):
        tasks = load_tasks("train", home, pins, purpose="inspect")
        tree = template(minted_example.pin)
    completions = [t for t in tasks if t.kind == "completion"]
    return SimpleNamespace(
        home=home,
        pins=pins,
        pin=minted_example.pin,
        summary=summary,
        stdout=out,
        stderr=err,
        root=root,
        tree=tree,
        completions=completions,
        repairs=[t for t in tasks if t.kind == "repair"],
        singles=[t for t in completions if len(parse_patch(t.broken_patch)) == 1],
        pairs=[t for t in completions if len(parse_patch(t.broken_patch)) == 2],
    )


def _task(completed, file: str):
    return next(t for t in completed.singles if t.file == file)


def test_one_completion_per_documented_mart_with_its_contract_and_a_wrong_completion(completed) -> None:
    from dbt_harvest.harvester.mint.completion import leaked_line

    family = completed.summary["families"]["completion"]
    assert {t.file for t in completed.singles} == MARTS and len(completed.singles) == 5
    # the staging models read only seeds: left to repairs, with the reason counted
    assert family["confirm_rejected"] == {"reads_no_model": 5}
    assert family["kept"] == len(completed.completions) == len(completed.singles) + len(completed.pairs)
    assert completed.repairs and all(".complete." not in t.instance_id for t in completed.repairs)
    for task in completed.singles:
        original = (completed.tree / task.file).read_text()
        assert (task.kind, task.operator, task.family, task.effect) == (
            "completion",
            "complete",
            "completion",
            "missing_model",
        )
        (delete,), (create,) = parse_patch(task.broken_patch), parse_patch(task.fix_patch)
        assert delete.deleted and delete.path == task.file and apply_to_text(original, delete) == ""
        assert create.created and apply_to_text("", create) == original
        wrong = [apply_to_text("", parse_patch(p)[0]) for p in task.wrong_repair_patches]
        assert wrong and all(w != original for w in wrong) and not task.weak
        name = Path(task.file).stem
        assert task.grading.condition_tabs == (name,) and task.grading.condition_cols[0]
        assert f"`{name}`" in task.problem_statement and leaked_line(task.problem_statement, original) == ""
        assert task.local_checks.covering_tests
        assert task.problem_statement.endswith(completion_closing(task.local_checks, name) + "\n")
    dim = _task(completed, "models/marts/dim_customers.sql").problem_statement
    assert (
        "`customer_segment`: prospect (never ordered)" in dim and "`stg_customers` (model), `fct_orders` (model)" in dim
    )


def test_a_json_mint_prints_one_object_and_its_progress_counts_per_kind(completed) -> None:
    """`harvest mint --json` piped: stdout is exactly one JSON object; stderr's progress lines say how far the
    run is, pins done and the completion kind's shards and candidates, ending on the counts the report has."""
    import re

    from dbt_harvest.harvester.mint.tally import counts_line

    assert json.loads(completed.stdout) == completed.summary and completed.stdout.count("\n") == 1
    lines = [line for line in completed.stderr.splitlines() if line.startswith("mint: ")]
    shape = re.compile(r"mint: (\d+)/(\d+) model shards, (\d)/1 pins done; completion (\d+)/(\d+) shards: (.*) \(")
    found = [shape.match(line) for line in lines]
    assert len(lines) >= 2 and all(found), completed.stderr[-3000:]
    first, last = found[0], found[-1]
    assert first is not None and last is not None
    assert first.group(1, 3, 4) == ("1", "0", "1")  # one shard finished, the pin not done yet
    # the pairs shard is planned once the single completions are done: the total grows by its round
    assert int(last.group(2)) == int(first.group(2)) + 1
    assert last.group(1) == last.group(2) == last.group(4) == last.group(5) and last.group(3) == "1"
    family = completed.summary["families"]["completion"]
    row = {
        "candidates": family["candidates"],
        "screened_out": 0,
        "confirm_rejected": sum(family["confirm_rejected"].values()),
        "kept": family["kept"],
    }
    assert last.group(6) == counts_line(row) == counts_line(completed.summary["this_run"])


def test_a_model_and_a_parent_it_reads_make_a_two_model_completion_without_a_build(completed) -> None:
    # every mart whose parents include a documented mart: active_customers reads dim_customers and fct_orders,
    # the other three read fct_orders (fct_orders itself reads staging models only)
    pairs = {(t.file, t.grading.condition_tabs) for t in completed.pairs}
    assert pairs == {
        ("models/marts/active_customers.sql", ("dim_customers", "active_customers")),
        ("models/marts/active_customers.sql", ("fct_orders", "active_customers")),
        ("models/marts/customer_monthly_revenue.sql", ("fct_orders", "customer_monthly_revenue")),
        ("models/marts/dim_customers.sql", ("fct_orders", "dim_customers")),
        ("models/marts/product_performance.sql", ("fct_orders", "product_performance")),
    }
    for pair in completed.pairs:
        single = _task(completed, pair.file)
        parent, child = (p.path for p in parse_patch(pair.fix_patch))
        assert child == pair.file and {p.path for p in parse_patch(pair.broken_patch)} == {parent, child}
        assert pair.problem_statement.startswith(
            f"The dbt models `{Path(child).stem}` and `{Path(parent).stem}` are missing"
        )
        assert pair.grading.condition_cols[1] == single.grading.condition_cols[0]
        # its wrong completions: the parent as it was, the child as the single task's wrong completion wrote it
        for patch, wrong_single in zip(pair.wrong_repair_patches, single.wrong_repair_patches, strict=True):
            created = {p.path: apply_to_text("", p) for p in parse_patch(patch)}
            assert created == {
                parent: (completed.tree / parent).read_text(),
                child: apply_to_text("", parse_patch(wrong_single)[0]),
            }


def test_completion_shards_resume_and_the_lock_holds_both_kinds(completed, tmp_path: Path) -> None:
    home, pins = tmp_path / "home", tmp_path / "pins"
    shutil.copytree(completed.home, home, symlinks=True)
    shutil.copytree(completed.pins, pins)
    again = _json(home, pins, "mint", completed.pin.id, "--kinds", "repair,completion", "--max-per-model", "1")
    assert again["this_run"]["candidates"] == 0  # every shard of both kinds is done: nothing is redone
    written = _json(home, pins, "corpus", "lock", "--max-per-model", "1")
    assert written["counts"]["train"] == len(completed.completions) + len(completed.repairs)
    # the lock records the cap the pin was minted under, and a rebuild without --max-per-model mints under it
    assert json.loads((pins / "_tasks.lock").read_text())["caps"] == {completed.pin.id: 1}
    verified = _json(home, pins, "mint", completed.pin.id, "--kinds", "repair,completion", "--verify-lock")
    assert verified["lock"]["same"] and verified["this_run"]["candidates"] == 0
    # a completion task lost from the store is missing from the lock's point of view
    (home / "tasks" / "train" / f"{completed.completions[0].instance_id}.json").unlink()
    code, out, _ = _run(home, pins, "corpus", "lock", "--verify", "--max-per-model", "1", "--json")
    assert code == 1 and completed.completions[0].instance_id in out
    code, _, err = _run(home, pins, "mint", completed.pin.id, "--kinds", "rewrite")
    assert code == 2 and "--kinds" in err


@pytest.mark.deep(
    covered_by=(
        "tests/harvester/test_completion.py::test_training_rows_show_the_contract_and_the_parents_never_the_missing_file",
        "tests/cli/test_feed_verify_progress.py::test_a_killed_feed_said_how_far_it_got_and_its_rerun_counts_what_it_kept",
        "tests/cli/test_feed_verify_progress.py::test_the_feed_report_counts_per_kind_and_what_of_the_lock_it_covers",
    )
)
def test_the_corpus_feed_renders_and_rewards_every_kind_and_says_what_of_the_lock_it_covers(
    completed, tmp_path: Path
) -> None:
    """`harvest corpus feed` over a home of repairs and completions: rows of both kinds render, each true
    answer rewards 1 and each unrepaired project 0, counted per kind; the report says which locked train
    tasks it fed as locked, which it did not feed and which it fed unlocked."""
    home, pins = tmp_path / "home", tmp_path / "pins"
    shutil.copytree(completed.home, home, symlinks=True)
    shutil.copytree(completed.pins, pins)
    _json(home, pins, "corpus", "lock", "--max-per-model", "1")
    fed = _json(home, pins, "corpus", "feed")
    repairs, completions = len(completed.repairs), len(completed.completions)
    assert fed["failed"] == {} and fed["train_tasks"] == repairs + completions
    for kind, n in (("repair", repairs), ("completion", completions)):
        counts = fed["per_kind"][kind]
        assert (counts["tasks"], counts["agentic_rows"], counts["rewarded"]) == (n, n, n), counts
        assert (counts["fixed_scores_1"], counts["unrepaired_scores_0"], counts["failed"]) == (n, n, 0), counts
        assert counts["single_turn_rows"] + counts["single_turn_left_out"] == n
    assert fed["lock"] == {
        "locked_train": repairs + completions,
        "fed_as_locked": repairs + completions,
        "fed_otherwise": [],
        "not_fed": [],
        "not_locked": [],
    }
    # a locked task missing from the home is named as not fed (the others' results are kept, nothing rebuilt)
    gone = completed.completions[0].instance_id
    (home / "tasks" / "train" / f"{gone}.json").unlink()
    again = _json(home, pins, "corpus", "feed")
    assert again["resumed"] == repairs + completions - 1
    assert again["lock"]["not_fed"] == [gone] and again["lock"]["fed_as_locked"] == repairs + completions - 1
    assert again["per_kind"]["completion"]["tasks"] == completions - 1


@pytest.mark.deep(
    covered_by=(
        "tests/harvester/test_completion.py::test_one_completion_per_documented_mart_with_its_contract_and_a_wrong_completion",
        "tests/harvester/test_completion.py::test_completion_shards_resume_and_the_lock_holds_both_kinds",
    )
)
def test_one_mint_of_both_kinds_keeps_what_repairs_then_completions_keep(
    completed, example_harvest, tmp_path: Path
) -> None:
    from dbt_harvest.corpora.store import load_tasks
    from tests.conftest import use_env

    home, pins = tmp_path / "home", tmp_path / "pins"
    shutil.copytree(example_harvest.home, home, symlinks=True)
    shutil.copytree(completed.pins, pins)  # the ledger the completed home was minted under
    both = _json(
        home, pins, "mint", completed.pin.id, "--kinds", "repair,completion", "--max-per-model", "1", "--jobs", "2"
    )
    assert both["families"]["completion"]["kept"] == len(completed.completions)
    with use_env(home, pins):
        fresh = {t.instance_id: t.to_json() for t in load_tasks("train", home, pins, purpose="inspect")}
    # completions wait for the repair rounds, whose screening they reuse: the same tasks, byte for byte
    assert fresh == {t.instance_id: t.to_json() for t in [*completed.repairs, *completed.completions]}


@pytest.mark.deep(
    covered_by=(
        "tests/harvester/test_quality.py::test_verify_rebuilds_every_task_independently_and_catches_a_bad_one",
        "tests/harvester/test_reach.py::test_tasks_verify_rebuilds_a_task_with_the_known_failures_left_out",
        "tests/harvester/test_history.py::test_tasks_verify_rebuilds_the_history_task_fresh",
    )
)
def test_tasks_verify_rebuilds_a_leaf_and_a_two_model_completion_fresh(completed) -> None:
    leaf = _task(completed, "models/marts/product_performance.sql")
    pair = next(t for t in completed.pairs if t.file == leaf.file)
    report = _json(completed.home, completed.pins, "tasks", "verify", leaf.instance_id, pair.instance_id)
    assert report["summary"]["ok"] == 2, report
    by_id = {t["instance_id"]: t["checks"] for t in report["tasks"]}
    assert set(by_id[leaf.instance_id]) == {
        "gold_matches",
        "broken_fails",
        "repair_passes",
        "wrong_repair",
        "distinct",
        "stable_gold",
        "determined",
    }
    # without fct_orders (removed with product_performance) the project cannot even be parsed: models read it;
    # without the leaf alone it builds (dbt leaves out the tests on a model that is gone) and scores 0
    assert "does not build" in by_id[pair.instance_id]["broken_fails"]["detail"] and not pair.local_checks.builds
    assert by_id[leaf.instance_id]["broken_fails"]["detail"].startswith("without the files: official 0")
    assert leaf.local_checks.builds and leaf.local_checks.covering_tests


@pytest.mark.deep(
    covered_by=(
        "tests/harvester/test_completion.py::test_dataset_materialize_score_and_spider2_export_carry_the_kind",
        "tests/harvester/test_completion.py::test_a_two_model_completion_written_back_is_graded_on_the_fast_path_as_dbt_grades_it",
        "tests/eval/test_audit.py::test_oracle_scores_n_of_n",
    )
)
def test_the_audit_plays_completions_oracle_n_of_n_noop_zero(completed) -> None:
    # `--kind completion`: only the completions are played (the repairs have audits of their own elsewhere)
    home, pins = completed.home, completed.pins
    n = len(completed.completions)
    results = {}
    for driver in ("oracle", "noop"):
        run = completed.root / f"audit-{driver}"
        report = _json(
            home, pins, "audit", "--split", "train", "--kind", "completion", "--driver", driver, "--run-dir", str(run)
        )
        assert report["n"] == n and report["kinds"] == ["completion"] and set(report["by_kind"]) == {"completion"}
        episodes = json.loads((run / "report.json").read_text())["episodes"]
        assert sorted(e["instance_id"] for e in episodes) == sorted(t.instance_id for t in completed.completions)
        results[driver] = report["by_kind"]["completion"]
        markdown = (run / "report.md").read_text()
        assert "## By kind" in markdown and "- kinds: completion tasks only" in markdown
    assert results["oracle"] == {"n": n, "official": n, "strict": n}
    assert results["noop"]["official"] == 0
    # the run folder records its filter: resumed without it (every kind) or with another, it is refused
    for other in ((), ("--kind", "repair")):
        code, _, err = _run(
            home,
            pins,
            "audit",
            "--split",
            "train",
            *other,
            "--driver",
            "oracle",
            "--run-dir",
            str(completed.root / "audit-oracle"),
        )
        assert code == 1 and "completion tasks only" in err, err
    # the sealed test split and spider2-dbt are audited over all their tasks: a usage error, in one line
    for args in (
        ("--split", "test", "--recipe", str(completed.root)),
        ("--benchmark", "spider2-dbt", "--split", "dev"),
    ):
        code, _, err = _run(home, pins, "audit", *args, "--kind", "completion", "--driver", "oracle")
        assert code == 2 and "--kind only applies to the corpus's train and dev splits" in err, err


def test_training_rows_show_the_contract_and_the_parents_never_the_missing_file(completed) -> None:
    from dbt_harvest.train.completion import render_files
    from dbt_harvest.train.project import PinnedProjectSource
    from dbt_harvest.train.sft_data import COMPLETION_SYSTEM_PROMPT, agentic_rows, single_turn_rows
    from tests.conftest import use_env

    task = _task(completed, "models/marts/active_customers.sql")
    original = (completed.tree / task.file).read_text()
    with use_env(completed.home, completed.pins):
        source = PinnedProjectSource(completed.pins)
        (row,) = single_turn_rows([task], source, 200_000)
        (episode,) = agentic_rows([task], source, 200_000)
        assert task.file not in source.broken_files(task)
        # the GRPO reward of that answer (the missing file is the one new path it may write), and of another file
        from dbt_harvest.harvester.grading.edited import build_and_score, release
        from dbt_harvest.train.reward import EditingBackend

        backend = EditingBackend(source, build_and_score)
        try:
            reward = backend.score_completion(task, row["completion"][0]["content"])
            stray = backend.score_completion(task, render_files({"models/marts/elsewhere.sql": original}))
        finally:
            release(task)
    assert (reward.official, reward.strict) == (1, 1), reward.reason
    assert stray.official == 0 and "not a file of the project" in stray.reason
    system, user = row["prompt"]
    assert system["content"] == COMPLETION_SYSTEM_PROMPT and task.problem_statement.strip() in user["content"]
    assert f'<file path="{task.file}">' not in user["content"] and original not in user["content"]
    assert '<file path="models/marts/dim_customers.sql">' in user["content"]  # a model it reads
    assert '<file path="models/marts/_marts.yml">' in user["content"]  # its contract
    assert row["completion"][0]["content"] == render_files({task.file: original})
    calls = [m["tool_calls"][0]["function"] for m in episode["messages"] if m.get("tool_calls")]
    assert {"name": "write_file", "arguments": {"path": task.file, "content": original}} in calls
    assert calls[-1]["name"] == "submit" and not any(
        c["arguments"].get("path") == task.file for c in calls if c["name"] == "read_file"
    )


def test_dataset_materialize_score_and_spider2_export_carry_the_kind(
    completed, example_harvest, tmp_path: Path
) -> None:
    from datasets import load_dataset

    home, pins = completed.home, completed.pins
    task = _task(completed, "models/marts/product_performance.sql")
    original = (completed.tree / task.file).read_text()
    built = _json(home, pins, "dataset", "build", "--out", str(tmp_path / "ds"), "--split", "train")
    assert built["splits"] == {"train": len(completed.completions) + len(completed.repairs)}
    rows = {r["instance_id"]: r for r in load_dataset(str(tmp_path / "ds"), split="train")}
    assert rows[task.instance_id]["kind"] == "completion" and rows[completed.repairs[0].instance_id]["kind"] == "repair"
    assert f"{len(completed.completions)} completion" in (tmp_path / "ds" / "README.md").read_text()
    # the full statement (documentation, then facts) and the documentation alone, side by side
    row = rows[task.instance_id]
    assert row["problem_statement"] == task.problem_statement and "Facts about the expected" in task.problem_statement
    assert row["documentation_statement"] == task.documentation_statement != task.problem_statement
    repair = completed.repairs[0]
    assert rows[repair.instance_id]["documentation_statement"] == repair.problem_statement
    # ... or the documentation alone as the statement (Spider 2.0-DBT's shape), said on the card
    _json(
        home,
        pins,
        "dataset",
        "build",
        "--out",
        str(tmp_path / "doc"),
        "--split",
        "train",
        "--statement",
        "documentation",
    )
    doc_rows = {r["instance_id"]: r for r in load_dataset(str(tmp_path / "doc"), split="train")}
    assert doc_rows[task.instance_id]["problem_statement"] == task.documentation_statement
    assert doc_rows[repair.instance_id]["problem_statement"] == repair.problem_statement
    assert "--statement documentation" in (tmp_path / "doc" / "README.md").read_text()

    # a user with the dataset only: materialize (the model is missing), write it, score it
    owner, name = completed.pin.url.split("://", 1)[-1].rstrip("/").split("/")[-2:]
    (tmp_path / "repos" / owner).mkdir(parents=True)
    subprocess.run(
        ["git", "clone", "-q", str(example_harvest.example.project_repo), str(tmp_path / "repos" / owner / name)],
        check=True,
        capture_output=True,
    )
    fresh_home, fresh_pins = tmp_path / "fresh-home", tmp_path / "fresh-pins"
    fresh_home.mkdir()
    out = tmp_path / "task"
    _json(
        fresh_home,
        fresh_pins,
        "tasks",
        "materialize",
        str(tmp_path / "ds"),
        task.instance_id,
        str(out),
        "--repo-mirror",
        str(tmp_path / "repos"),
        "--package-mirror",
        str(example_harvest.example.mirror),
    )
    assert not (out / "project" / task.file).exists() and (out / "project" / "models/marts/fct_orders.sql").is_file()
    noop = _json(
        fresh_home, fresh_pins, "score", "--task", f"{tmp_path / 'ds'}:{task.instance_id}", "--workspace", str(out)
    )
    (out / "project" / task.file).write_text(original)
    done = _json(
        fresh_home, fresh_pins, "score", "--task", f"{tmp_path / 'ds'}:{task.instance_id}", "--workspace", str(out)
    )
    assert (noop["official"]["score"], done["official"]["score"]) == (0, 1)

    # Spider2's own shape: the project with the model missing, the contract as the instruction
    exported = _json(
        home, pins, "export", "spider2", str(tmp_path / "spider2"), "--split", "train", "--statement", "documentation"
    )
    assert task.instance_id in {t["instance_id"] for t in exported["exported"]}
    lines = [json.loads(line) for line in (tmp_path / "spider2" / "spider2-dbt.jsonl").read_text().splitlines()]
    instruction = next(line["instruction"] for line in lines if line["instance_id"] == task.instance_id)
    assert instruction == task.documentation_statement  # the documentation-only statement, unchanged
    example = next((tmp_path / "spider2").rglob(task.instance_id))
    assert not list(example.rglob(Path(task.file).name)) and list(example.rglob("fct_orders.sql"))


def test_a_two_model_completion_written_back_is_graded_on_the_fast_path_as_dbt_grades_it(completed) -> None:
    """Both removed models written back: the fast path rebuilds both (the upstream one is no descendant of the
    task's model) and agrees with a dbt build, for the true files and for a wrong completion."""
    from dbt_harvest.core.patching import apply_to_text, parse_patch
    from dbt_harvest.harvester.grading.edited import grade, release
    from tests.conftest import use_env

    pair = completed.pairs[0]
    files = {p.path: apply_to_text("", p) for p in parse_patch(pair.fix_patch)}
    (wrong_patch,) = pair.wrong_repair_patches[:1]
    wrong = {**files, **{p.path: apply_to_text("", p) for p in parse_patch(wrong_patch) if p.created}}
    assert len(files) == 2 and wrong != files
    with use_env(completed.home, completed.pins):
        try:
            fast = grade(pair, files, "fast", fallback=None)
            fast_wrong = grade(pair, wrong, "fast", fallback=None)
            dbt_wrong = grade(pair, wrong, "dbt")
        finally:
            release(pair)
    assert (fast.path, fast.official, fast.strict) == ("fast", 1, 1), fast.reason
    assert (fast_wrong.path, fast_wrong.official) == ("fast", 0) and dbt_wrong.official == 0
