"""History tasks (harvester/history): a fixture whose git history holds a docs commit, a seeds commit, a refactor
that changes nothing and one real fix; `harvest mine` pins and mints exactly the fix, through the CLI, with real
sandboxed builds, and the task flows on (tasks verify) like any repair."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from dbt_harvest.core.errors import PinError
from dbt_harvest.harvester.gitrepos import GitRepo, make_git_repo
from dbt_harvest.harvester.history.candidate import history_candidate, partial_fixes
from dbt_harvest.harvester.history.fix import Fix
from dbt_harvest.harvester.history.scan import Change, CommitInfo, judge
from tests.cli_home import cli_json, run_cli
from tests.fixtures import fixture_dir

FIXED_JOIN = "   and r.status = 'completed'\n"
BUGGY_JOIN = "   and r.status != 'cancelled'\n"
REVENUE = "models/marts/station_revenue.sql"
CITY = "models/marts/city_minutes.sql"


DURATIONS = "models/marts/rental_durations.sql"


def _history(tmp: Path) -> GitRepo:
    """The fixture's history: C0 the project (station revenue counts refunded rentals), C1 docs, C2 seeds,
    C3 a refactor of another model that changes no output, C4 the fix; then C5 adds a model that does not
    build, C6 fixes another model on top of it (its parent cannot be pinned), C7 removes the broken model."""
    source = fixture_dir("bike_rentals")
    revenue = (source / REVENUE).read_text()
    city = (source / CITY).read_text()
    seeds = (source / "seeds/raw_rentals.csv").read_text()
    assert BUGGY_JOIN in revenue and " st" in city
    return make_git_repo(
        source,
        tmp / "repo",
        commits=[
            {
                "message": "Docs: fix a typo in the README",
                "files": {"README.md": (source / "README.md").read_text().replace("small", "little")},
            },
            {
                "message": "Fix seed data: two rentals were missing",
                "files": {
                    "seeds/raw_rentals.csv": seeds + "8,3,completed,40,8.0,2024-05-05\n9,2,refunded,10,2.0,2024-05-05\n"
                },
            },
            {
                "message": "Fix naming: call the stations s in city_minutes",
                "files": {CITY: city.replace(" st.", " s.").replace(" st on", " s on")},
            },
            {
                "message": "Fix station revenue: refunded rentals were counted as paid\n\nOnly completed rentals are paid.",
                "files": {REVENUE: revenue.replace(BUGGY_JOIN, FIXED_JOIN)},
            },
            {
                "message": "Add a rental durations model",
                "files": {
                    DURATIONS: "select rental_id, minutes / hours_rented as ratio from {{ ref('stg_rentals') }}\n"
                },
            },
            {
                "message": "Fix city minutes: cancelled rentals were counted",
                "files": {
                    CITY: city.replace(" st.", " s.")
                    .replace(" st on", " s on")
                    .replace("group by", "where r.status != 'cancelled'\ngroup by")
                },
            },
            {"message": "Remove the unfinished durations model", "files": {DURATIONS: None}},
        ],
    )


_run, _json = run_cli, cli_json


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("history")
    repo = _history(root)
    base = _json(root, "add", f"{repo.path}@{repo.head}")
    _json(root, "split", "assign", "--test", "0", "--dev", "0")
    from click.testing import CliRunner

    from dbt_harvest.cli import main

    # every progress update printed: the mint of the history pins says how far, per kind (history)
    env = {"HARVEST_HOME": str(root / "home"), "HARVEST_PINS": str(root / "pins"), "HARVEST_PROGRESS_INTERVAL": "0"}
    result = CliRunner().invoke(main, ["mine", base["id"], "--source", str(repo.path), "--json"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    return {"root": root, "repo": repo, "base": base, "report": report, "progress": result.stderr}


def test_the_history_mint_says_how_far_per_kind(mined: dict) -> None:
    lines = [line for line in mined["progress"].splitlines() if line.startswith("mint: ")]
    assert lines, mined["progress"]
    last = re.sub(r" \(\d+(m\d+)?s\)$", "", lines[-1])
    pinned = mined["report"]["pinned"]
    assert re.fullmatch(
        rf"mint: (\d+)/\1 model shards, {pinned}/{pinned} pins done; history \1/\1 shards: \d+ candidates, "
        rf"\d+ screened out, \d+ rejected at confirm, {mined['report']['minted']['tasks']} kept",
        last,
    ), last


def test_exactly_the_fix_becomes_a_task(mined: dict) -> None:
    repo, report = mined["repo"], mined["report"]
    c0, c1, c2, c3, c4, c5, c6, c7 = repo.commits
    by_commit = {v["commit"]: v for v in report["not_taken"]}
    assert report["commits"] == 8 and report["candidates"] == 3
    assert by_commit[c7]["reason"] == by_commit[c5]["reason"] == "adds, removes or renames a model"
    assert by_commit[c2]["reason"] == "changes no model SQL (only seeds)"
    assert by_commit[c1]["reason"] == "changes no model SQL (only docs)"
    assert by_commit[c0]["reason"] == "the repository's first commit"
    # C6's parent holds a model that does not build: refused with the build's error; the other two candidates
    # are pinned (the parent with the fix applied builds), and the mint admits only the real fix
    assert [f["commit"] for f in report["fixes"]] == [c6, c4, c3] and report["pinned"] == 2
    assert report["fixes"][0]["refused"].startswith("build failed") and report["fixes"][0]["pin"] == ""
    minted = report["minted"]
    assert minted["tasks"] == 1
    fix_pin = next(f["pin"] for f in report["fixes"] if f["commit"] == c4)
    refactor_pin = next(f["pin"] for f in report["fixes"] if f["commit"] == c3)
    assert len(minted["per_pin"][fix_pin]["kept"]) == 1
    assert minted["per_pin"][refactor_pin]["kept"] == []
    # the refactor builds the same tables: screening finds its candidate equivalent to the fixed project
    assert minted["per_pin"][refactor_pin]["refused"] == ["screen: equivalent"]


def test_the_history_pin_is_the_parent_with_the_fix_and_holds_no_code(mined: dict) -> None:
    root, repo, base = mined["root"], mined["repo"], mined["base"]
    c4 = repo.commits[4]
    pin_file = root / "pins" / f"{base['id'].split('@')[0]}@{repo.commits[3][:12]}+fix-{c4[:12]}.toml"
    text = pin_file.read_text()
    assert f'fix_commit = "{c4}"' in text and f'commit = "{repo.commits[3]}"' in text
    assert f'mined_from = "{base["id"]}"' in text and REVENUE in text
    # the fix itself is read from the repository's history, never stored in the pin
    assert "'completed'" not in text and "'cancelled'" not in text and "left join" not in text


def test_the_task_undoes_the_fix_on_the_parents_data_and_says_the_symptom_not_the_message(mined: dict) -> None:
    from dbt_harvest.core.patching import apply_to_text, parse_patch
    from dbt_harvest.core.task_record import read_task

    root, repo = mined["root"], mined["repo"]
    (path,) = sorted((root / "home" / "tasks" / "train").glob("*.history.*.json"))
    task = read_task(path)
    assert (task.source, task.kind, task.operator, task.family) == ("history", "repair", "history", "history")
    assert task.fix_commit == repo.commits[4] and task.fix_date == "2024-01-05T00:00:00Z"
    assert task.fix_subject == "Fix station revenue: refunded rentals were counted as paid"
    assert task.base_commit == repo.commits[3] and task.file == REVENUE
    fixed = (fixture_dir("bike_rentals") / REVENUE).read_text().replace(BUGGY_JOIN, FIXED_JOIN)
    (broken,) = parse_patch(task.broken_patch)
    assert BUGGY_JOIN in apply_to_text(fixed, broken)  # the task's bug is the parent's text
    assert task.wrong_repair_patches and task.local_tests >= 1
    statement = task.problem_statement.lower()
    # the symptom as observed on the built tables; nothing of the commit message (which names the fix)
    assert "paid_rentals" in statement and "too high" in statement
    assert "refund" not in statement and "completed" not in statement and task.fix_subject.lower() not in statement
    data = json.loads(path.read_text())
    assert data["source"] == "history" and data["fix_commit"] == repo.commits[4]


def test_tasks_verify_rebuilds_the_history_task_fresh(mined: dict) -> None:
    root = mined["root"]
    (path,) = sorted((root / "home" / "tasks" / "train").glob("*.history.*.json"))
    report = _json(root, "tasks", "verify", path.stem)
    assert report["summary"]["ok"] == 1, report


def test_since_bounds_the_walk_and_a_derived_pin_is_not_mined(mined: dict) -> None:
    root, repo, base = mined["root"], mined["repo"], mined["base"]
    report = _json(root, "mine", base["id"], "--source", str(repo.path), "--since", "2024-01-04", "--scan-only")
    assert report["commits"] == 5
    assert [v["commit"] for v in report["taken"]] == [repo.commits[6], repo.commits[4], repo.commits[3]]
    assert report["pinned"] == 0 and "minted" not in report
    history_id = report_pin = mined["report"]["fixes"][1]["pin"]
    assert report_pin
    code, _, err = _run(root, "mine", history_id, "--source", str(repo.path))
    assert code == 1 and "derived pin" in err and len(err.strip().splitlines()) == 1
    code, _, err = _run(root, "mine", base["id"], "--since", "May 2024")
    assert code == 2 and "--since" in err


def test_a_pin_whose_fix_does_not_match_the_history_is_refused(mined: dict) -> None:
    import pygit2

    from dbt_harvest.core.pin import read_pin
    from dbt_harvest.harvester.history.fix import pin_fix

    root, repo = mined["root"], mined["repo"]
    pin = read_pin(root / "pins" / f"{mined['report']['fixes'][1]['pin']}.toml")
    git = pygit2.Repository(str(repo.path))
    assert pin_fix(pin, git).sha256 == pin.fix_sha256
    with pytest.raises(PinError, match="does not match the pin's fix_sha256"):
        pin_fix(dataclasses.replace(pin, fix_sha256="0" * 64), git)


# ------------------------------------------------------------------------------------------------- pure parts


def _commit(subject: str, changes: dict[str, str], parents: tuple[str, ...] = ("p" * 40,)) -> CommitInfo:
    return CommitInfo(
        "c" * 40,
        parents,
        "2024-01-01T00:00:00Z",
        subject,
        "",
        tuple(Change(path, status) for path, status in changes.items()),
    )


def _texts(before: str, after: str):  # type: ignore[no-untyped-def]
    return lambda sha, path: before if sha.startswith("p") else after


@pytest.mark.parametrize(
    "subject, changes, before, after, reason",
    [
        ("fix typo", {"README.md": "modified"}, "", "", "changes no model SQL (only docs)"),
        ("fix ci", {".github/workflows/ci.yml": "modified"}, "", "", "changes no model SQL (only CI)"),
        ("fix tests", {"tests/assert_positive.sql": "modified"}, "", "", "changes no model SQL (only tests)"),
        ("fix model", {"models/a.sql": "added"}, "", "", "adds, removes or renames a model"),
        (
            "fix two",
            {"models/a.sql": "modified", "models/b.sql": "modified"},
            "select 1",
            "select 2",
            "changes 2 model files (a history task undoes at most 1)",
        ),
        (
            "fix with macro",
            {"models/a.sql": "modified", "macros/m.sql": "modified"},
            "select 1",
            "select 2",
            "changes macros too (the model change may need them)",
        ),
        (
            "fix formatting",
            {"models/a.sql": "modified"},
            "select  a -- note\nfrom t",
            "select a\nfrom t /* x */",
            "formatting or comments only",
        ),
        (
            "add column",
            {"models/a.sql": "modified"},
            "select a from t",
            "select a, b from t",
            "the message does not say it fixes anything",
        ),
        (
            "fix docs typo",
            {"models/a.sql": "modified"},
            "select a from t",
            "select a as b from t",
            "the message fixes docs, tests, typos or lint, not logic",
        ),
        (
            "Bugfix/dedupe rows (#12)",
            {"models/a.sql": "modified", "README.md": "modified"},
            "select a from t",
            "select distinct a from t",
            "",
        ),
    ],
)
def test_a_commit_is_judged_from_what_it_changed_and_says(
    subject: str, changes: dict, before: str, after: str, reason: str
) -> None:
    verdict = judge(_commit(subject, changes), _texts(before, after))
    assert verdict.taken == (reason == "") and verdict.reason == reason


def test_a_squash_merges_list_of_work_in_progress_commits_does_not_make_a_feature_a_fix() -> None:
    feature = CommitInfo(
        "c" * 40,
        ("p" * 40,),
        "2025-02-19T00:00:00Z",
        "Feature: add squads to the ad report (#33)",
        "* add squads\n\n* fix missing comma\n\n* bump version",
        (Change("models/a.sql", "modified"),),
    )
    assert (
        judge(feature, _texts("select a from t", "select a, b from t")).reason
        == "the message does not say it fixes anything"
    )
    merged = dataclasses.replace(
        feature, subject="Merge pull request #9 from org/branch", body="Handle refunds twice counted in the ad report"
    )
    assert judge(merged, _texts("select a from t", "select a, b from t")).taken


def test_the_first_commit_is_no_fix_and_a_merge_is_judged_against_its_first_parent() -> None:
    assert (
        judge(_commit("fix", {"models/a.sql": "modified"}, parents=()), _texts("", "")).reason
        == "the repository's first commit"
    )
    merged = judge(
        _commit(
            "Merge pull request #3 from org/bugfix/nulls", {"models/a.sql": "modified"}, parents=("p" * 40, "q" * 40)
        ),
        _texts("select a from t", "select coalesce(a, 0) from t"),
    )
    assert merged.taken and merged.parent == "p" * 40


def test_wrong_repairs_are_the_fix_in_part_and_the_fix_with_a_slip() -> None:
    before = "select\n    a,\n    b\nfrom t\nwhere x = 1\n"
    after = "select\n    a,\n    coalesce(b, 0) as b\nfrom t\nwhere x = 2\n"
    parts = partial_fixes(before, after)
    assert parts == [
        "select\n    a,\n    coalesce(b, 0) as b\nfrom t\nwhere x = 1\n",
        "select\n    a,\n    b\nfrom t\nwhere x = 2\n",
    ]
    fix = Fix("f" * 40, "p" * 40, ("models/m.sql",), (before,), (after,))
    cand = history_candidate("pin", "model.x.m", "models/m.sql", fix)
    assert cand is not None and cand.original == after and cand.broken == before
    texts = [w.apply(before) for w in cand.mutation.wrong_repairs]
    intents = [w.intent for w in cand.mutation.wrong_repairs]
    # the fix in part alternates with the fix with a slip (so a fix whose places only build together still
    # reaches its slips within the few wrong repairs confirmation builds)
    assert texts[0] == parts[0] and texts[2] == parts[1] and after not in texts and before not in texts
    assert intents[0] == intents[2] == "the fix in part" and intents[1].startswith("the fix, with a slip")
    assert all(i.startswith("the fix, with a slip") for i in intents[4:])
    assert history_candidate("pin", "model.x.m", "models/m.sql", dataclasses.replace(fix, after=(before,))) is None


def test_a_history_pin_carries_all_its_fix_fields_or_none(mined: dict) -> None:
    import tomllib

    from dbt_harvest.core.pin import pin_from_dict

    root = mined["root"]
    data = tomllib.loads((root / "pins" / f"{mined['report']['fixes'][1]['pin']}.toml").read_text())
    data.pop("digest")
    assert pin_from_dict(data).is_history
    for key in ("fix_files", "fix_sha256", "mined_from"):
        broken = {k: v for k, v in data.items() if k != key}
        with pytest.raises(PinError, match="go together"):
            pin_from_dict(broken)
    with pytest.raises(PinError, match="fix_files"):
        pin_from_dict({**data, "fix_files": ["../etc/passwd"]})
    shutil.rmtree(root / "scratch", ignore_errors=True)


def test_the_history_task_flows_through_dataset_since_view_training_rows_reward_and_audit(
    mined: dict, tmp_path: Path
) -> None:
    from datasets import load_dataset

    from dbt_harvest.core.task_record import read_task
    from dbt_harvest.corpora.untrusted import UntrustedRowError, check_row
    from dbt_harvest.harvester.grading.edited import build_and_score, release
    from dbt_harvest.train.project import PinnedProjectSource
    from dbt_harvest.train.reward import EditingBackend
    from dbt_harvest.train.sft_data import single_turn_rows
    from tests.conftest import use_env

    root, repo = mined["root"], mined["repo"]
    (path,) = sorted((root / "home" / "tasks" / "train").glob("*.history.*.json"))
    task = read_task(path)
    built = _json(root, "dataset", "build", "--out", str(tmp_path / "ds"), "--split", "train")
    assert built["splits"] == {"train": 1}
    (row,) = load_dataset(str(tmp_path / "ds"))["train"]
    assert (row["source"], row["fix_commit"], row["fix_files"]) == ("history", repo.commits[4], [REVENUE])
    assert row["fix_date"] == task.fix_date and row["fix_url"] == ""  # a local:// repository has no commit link
    assert row["pin"].endswith(f"+fix-{repo.commits[4][:12]}") and len(row["fix_sha256"]) == 64
    check_row(row)
    for bad in ({"source": "mutation"}, {"fix_files": ["../x.sql"]}, {"fix_commit": "not-hex"}):
        with pytest.raises(UntrustedRowError):
            check_row({**row, **bad})
    readme = (tmp_path / "ds" / "README.md").read_text()
    assert "## Real fixes from history" in readme and "train 1 history" in readme
    # the view after a training cut-off keeps fixes made on or after the date, and nothing planted
    newer = _json(
        root, "dataset", "build", "--out", str(tmp_path / "since"), "--split", "train", "--since", "2024-01-05"
    )
    assert newer["splits"] == {"train": 1}
    code, _, err = _run(
        root, "dataset", "build", "--out", str(tmp_path / "later"), "--split", "train", "--since", "2024-02-01"
    )
    assert code == 1 and "on or after 2024-02-01" in err and not (tmp_path / "later").exists()
    # training rows and the reward read the history pin's tree (the parent with the fix) like any pin's
    fixed = (fixture_dir("bike_rentals") / REVENUE).read_text().replace(BUGGY_JOIN, FIXED_JOIN)
    with use_env(root / "home", root / "pins"):
        source = PinnedProjectSource(root / "pins")
        (sft,) = single_turn_rows([task], source, 200_000)
        backend = EditingBackend(source, build_and_score)
        try:
            reward = backend.score_completion(task, sft["completion"][0]["content"])
        finally:
            release(task)
    assert BUGGY_JOIN.strip() in sft["prompt"][1]["content"] and FIXED_JOIN.strip() not in sft["prompt"][1]["content"]
    assert FIXED_JOIN.strip() in sft["completion"][0]["content"] and fixed.strip() in sft["completion"][0]["content"]
    assert (reward.official, reward.strict) == (1, 1), reward.reason
    # the corpus feed counts it as its own kind: rows rendered, the real fix rewards 1, the broken parent 0
    fed = _json(root, "corpus", "feed")
    assert fed["per_kind"] == {
        "history": {
            "tasks": 1,
            "single_turn_rows": 1,
            "single_turn_left_out": 0,
            "agentic_rows": 1,
            "rewarded": 1,
            "fixed_scores_1": 1,
            "unrepaired_scores_0": 1,
            "failed": 0,
        }
    }
    # the audit plays it like any repair: the oracle solves it, the broken project scores 0
    for driver, want in (("oracle", 1), ("noop", 0)):
        report = _json(
            root, "audit", "--split", "train", "--driver", driver, "--run-dir", str(tmp_path / driver), "--workers", "1"
        )
        assert (report["n"], report["official"]) == (1, want)


def test_corpus_check_refuses_a_history_pin_whose_base_is_not_pinned(mined: dict, tmp_path: Path) -> None:
    from dbt_harvest.corpora.checks import check_pins_folder

    pins = tmp_path / "pins"
    shutil.copytree(mined["root"] / "pins", pins)
    history = mined["report"]["fixes"][1]["pin"]
    assert not [p for p in check_pins_folder(pins) if "was mined from" in p]
    (pins / f"{mined['base']['id']}.toml").unlink()
    problems = [p for p in check_pins_folder(pins) if "was mined from" in p]
    assert len(problems) == 2 and any(history in p for p in problems), problems


def test_a_parent_that_cannot_be_pinned_is_remembered_and_built_again_only_when_asked(mined: dict) -> None:
    root, repo, base = mined["root"], mined["repo"], mined["base"]
    refused = mined["report"]["fixes"][0]
    again = _json(root, "mine", base["id"], "--source", str(repo.path), "--no-mint")
    first = again["fixes"][0]
    assert (first["commit"], first["status"], first["refused"]) == (
        repo.commits[6],
        "refused before",
        refused["refused"],
    )
    assert [f["status"] for f in again["fixes"][1:]] == ["exists", "exists"]
    retried = _json(root, "mine", base["id"], "--source", str(repo.path), "--no-mint", "--retry-refused")
    assert retried["fixes"][0]["status"] == "" and retried["fixes"][0]["refused"].startswith("build failed")


def test_a_fix_is_never_written_through_a_link_the_repository_planted(tmp_path: Path) -> None:
    from dbt_harvest.harvester.history.fix import FixError, apply_fix

    outside = tmp_path / "outside.sql"
    outside.write_text("select 1\n")
    root = tmp_path / "tree"
    (root / "models").mkdir(parents=True)
    (root / "models" / "m.sql").symlink_to(outside)
    fix = Fix("f" * 40, "p" * 40, ("models/m.sql",), ("select 1\n",), ("select 2\n",))
    with pytest.raises(FixError, match="models/m.sql"):
        apply_fix(root, fix)
    assert outside.read_text() == "select 1\n"
    (root / "models" / "m.sql").unlink()
    (root / "models" / "m.sql").write_text("select 1\n")
    apply_fix(root, fix)
    assert (root / "models" / "m.sql").read_text() == "select 2\n"
    with pytest.raises(FixError, match="does not hold its parent text"):
        apply_fix(root, fix)  # applied twice: the tree already holds the fix
