"""The used-by chain, end to end, as a user runs it: only the `harvest` command line (subprocesses), the
docs/CHAIN.md walkthrough step by step, on four original projects (tests/e2e/projects),
one of them a package built from its ``integration_tests/`` through ``local: ../`` (the layout of most of the
committed corpus: its models live outside ``project_dir``), with a hub package served by the example's mirror.

pin four repositories under public-looking origins -> reserve train, dev and test groups -> mint with
template statements -> lint -> build the dataset -> load it -> publish dev (private) and train to a
loopback Hub -> load both splits from the Hub -> train a tiny SFT adapter -> freeze it -> audit the sealed
test split once for that recipe (a second audit is refused) -> the oracle scores N/N on dev, noop 0/N ->
dev exported in Spider 2.0-DBT's layout, standing in for the benchmark's sealed part, imported -> the
experiment (base vs trained on the sealed split and on Spider2's sealed part, once per arm, killed after
training and resumed) -> the sealed audit's report rewritten from its folder, and noop vs oracle compared
task by task.
Nothing here writes a task record, a ledger or a statement by hand; the projects become git repositories
with the git command line. No committed artefact may hold a path of this machine.

One test on purpose: every step feeds the next, and the point is that the seams between them hold.
Budget: a few minutes on two cores (mint bounded by --families and --max-per-model).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = Path(__file__).resolve().parent / "projects"
sys.path.insert(0, str(ROOT / "tests" / "corpora"))

from fake_hub import FakeHub  # noqa: E402

#: The `harvest` console script of this checkout (the same entry point pyproject installs).
HARVEST = [sys.executable, "-m", "dbt_harvest"]
#: Our projects and the public-looking origins they are pinned under. The embedded example is not pinned here
#: (every other suite and `harvest demo` harvest it); its package mirror serves the package-layout project.
ORIGINS = {
    "lending_library": "https://github.com/dbt-harvest-fixtures/lending_library",
    "clinic_scheduling": "https://github.com/dbt-harvest-fixtures/clinic_scheduling",
    "freight_ops": "https://github.com/dbt-harvest-fixtures/freight_ops",
}
#: The package-layout project (train split): its integration_tests/ builds it; it needs the example's mirror.
PACKAGE, PACKAGE_ORIGIN = "harvest_meters", "https://github.com/dbt-harvest-fixtures/harvest_meters"
TEST_GROUP, DEV_GROUP = "dbt-harvest-fixtures/clinic_scheduling", "dbt-harvest-fixtures/freight_ops"
#: The mint is bounded so the whole chain fits a few minutes; these families mint in every project.
FAMILIES = "time,null"
#: The training config the docs/CHAIN.md walkthrough uses (tiny local model, CPU).
SFT_CONFIG = Path(__file__).resolve().parent / "sft-e2e.toml"
#: The experiment recipe docs/CHAIN.md names for a CPU (tiny model; its SFT config sits beside it), and what
#: it reads beside it; the chain copies them to the same place in its working folder, as in a clone, since the
#: recipe's Spider2 checkout (``[audit] spider2``) is relative to it.
EXPERIMENT = "tests/e2e/experiment-e2e.toml"
RECIPE_FILES = ("experiment-e2e.toml", "sft-experiment.toml", "grpo-experiment.toml", "spider2_as_sealed.py")
#: Where the walkthrough exports dev in Spider 2.0-DBT's layout, and the stand-in for the benchmark made from it.
SPIDER2_EXPORT, SPIDER2_CHECKOUT = "runs/spider2-export", "runs/spider2-dbt"


class Chain:
    """The user's shell: one working folder, one environment, `harvest` run as a subprocess."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work, self.env = work, env
        self.timings: dict[str, float] = {}
        self.calls: list[tuple[str, ...]] = []

    def run(self, *args: str, ok: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        started = time.perf_counter()
        self.calls.append(args)
        done = subprocess.run(
            [*HARVEST, *args], cwd=self.work, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        words = [a for a in args[:2] if a.replace(" ", "").isalnum()]  # the subcommand, not a path or spec
        step, seconds = " ".join(words), time.perf_counter() - started
        self.timings[step] = self.timings.get(step, 0.0) + seconds
        print(f"[e2e] harvest {step}: {seconds:.1f} s (exit {done.returncode})", file=sys.stderr, flush=True)
        if ok:
            assert done.returncode == 0, f"harvest {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}"
        return done

    def interrupted(self, *args: str, when: Callable[[], bool], timeout: float = 900) -> int:
        """Start ``harvest ARGS`` and kill it (SIGKILL, the whole process group) once ``when()`` holds;
        -> its return code (-9 when it was killed, as a crash would)."""
        self.calls.append(args)
        proc = subprocess.Popen(
            [*HARVEST, *args],
            cwd=self.work,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline and not when():
            time.sleep(0.2)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()

    def script(self, path: str, *args: str) -> str:
        """A user's `python PATH ARGS` step, in the working folder; -> its stdout."""
        done = subprocess.run(
            [sys.executable, path, *args], cwd=self.work, env=self.env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr[-4000:]
        return done.stdout

    def json(self, *args: str) -> dict:
        return json.loads(self.run(*args, "--json").stdout)

    def python(self, script: str, *args: str, **env: str) -> dict:
        """A user's Python step (load_dataset), in a fresh process; its last stdout line as JSON."""
        done = subprocess.run(
            [sys.executable, "-c", script, *args],
            cwd=self.work,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        return json.loads(done.stdout.strip().splitlines()[-1])


def _git_repo(src: Path, dest: Path) -> str:
    """``src`` committed as a fresh git repository at ``dest`` with the git command line; -> its commit."""
    shutil.copytree(src, dest)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "e2e",
        "GIT_AUTHOR_EMAIL": "e2e@example.invalid",
        "GIT_COMMITTER_NAME": "e2e",
        "GIT_COMMITTER_EMAIL": "e2e@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_DATE": "2024-07-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2024-07-01T00:00:00Z",
    }
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial import"]):
        subprocess.run(["git", *cmd], cwd=dest, env=env, check=True, capture_output=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=dest, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def _shape(args: Sequence[str]) -> tuple[tuple[str, ...], frozenset[str]]:
    """A harvest command's shape: its subcommand words and the options it passes (not their values)."""
    words = []
    for arg in args:
        if arg.startswith("-") or not arg.replace(" ", "").isalnum():
            break
        words.append(arg)
    return tuple(words[:2]), frozenset(a for a in args if a.startswith("--") and a != "--json")


#: The page whose walkthrough this test runs: its first ``bash`` block after the title.
CHAIN_PAGE = ROOT / "docs" / "CHAIN.md"
CHAIN_TITLE = "# The chain, step by step"


def chain_walkthrough(page: Path = CHAIN_PAGE) -> list[tuple[str, ...]]:
    """The `harvest` commands of docs/CHAIN.md's "The chain, step by step" block, as argument lists."""
    text = page.read_text(encoding="utf-8")
    assert CHAIN_TITLE in text, f"{page} has no {CHAIN_TITLE!r} heading: the walkthrough moved"
    block = text.split(CHAIN_TITLE, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0]
        for part in line.split(";"):
            words = part.split()
            if "harvest" in words:
                commands.append(tuple(words[words.index("harvest") + 1 :]))
    return commands


#: The steps the walkthrough shows, in the order each first appears (subcommand words, as ``_shape`` reads them).
WALKTHROUGH_STEPS = (
    ("demo",),
    ("add",),
    ("split", "assign"),
    ("mint",),
    ("lint",),
    ("dataset", "build"),
    ("publish",),
    ("train", "sft"),
    ("train", "freeze"),
    ("corpus", "feed"),
    ("audit",),
    ("audit", "report"),
    ("audit", "compare"),
    ("export", "spider2"),
    ("spider2", "import"),
    ("experiment",),
)


def test_the_walkthrough_is_read_from_docs_chain() -> None:
    """docs/CHAIN.md's block parses into the chain's steps, in order: the deep test below compares those
    commands with the ones it ran, so a block that moved or lost its steps must fail here, fast."""
    steps = [_shape(command)[0] for command in chain_walkthrough()]
    first_seen = [step for i, step in enumerate(steps) if step not in steps[:i]]
    assert first_seen == list(WALKTHROUGH_STEPS)


def test_the_walkthrough_parser_joins_lines_splits_commands_and_drops_comments(tmp_path: Path) -> None:
    """A continued line is one command, ``;`` separates two, a comment is no argument, other tools are skipped."""
    page = tmp_path / "CHAIN.md"
    page.write_text(
        f"{CHAIN_TITLE}\n\ntext\n\n```bash\nmkdir -p src   # not ours\n"
        "harvest add ./src/p@abc \\\n  --origin https://github.com/o/p   # a comment --not-an-option\n"
        "harvest tasks list ; harvest lint\n```\n\n```bash\nharvest gc\n```\n",
        encoding="utf-8",
    )
    assert chain_walkthrough(page) == [
        ("add", "./src/p@abc", "--origin", "https://github.com/o/p"),
        ("tasks", "list"),
        ("lint",),
    ]
    (tmp_path / "moved.md").write_text("# Another page\n\n```bash\nharvest lint\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="the walkthrough moved"):
        chain_walkthrough(tmp_path / "moved.md")


def spider2_stand_in(chain: Chain, dev: int) -> dict[str, str]:
    """docs/CHAIN.md's Spider2 steps: dev exported in Spider 2.0-DBT's layout, its tasks standing in for the
    benchmark's sealed part (an export of our own tasks has none), imported; -> exported id -> sealed id."""
    exported = chain.json("export", "spider2", "--split", "dev", SPIDER2_EXPORT)
    assert exported["exported"] and len(exported["exported"]) + len(exported["skipped"]) == dev, exported
    played = json.loads(chain.script("tests/e2e/spider2_as_sealed.py", SPIDER2_EXPORT, SPIDER2_CHECKOUT))
    assert sorted(played) == sorted(t["instance_id"] for t in exported["exported"])
    imported = chain.json("spider2", "import", SPIDER2_CHECKOUT)
    assert imported["benchmark"] is True
    assert imported["parts"]["sealed"] == {"instances": 48, "playable": len(played)}, imported["parts"]
    return played


def check_spider2_leg(chain: Chain, experiment: dict, played: dict[str, str], recipe_run: str) -> None:
    """The experiment audited Spider2's sealed part once per arm, over all 48 instances (the absent ones named
    and counted 0), compared the arms and said what evaluate.py prints; a second sealed audit is refused."""
    from dbt_harvest.eval.spider2.split import committed

    absent = sorted(set(committed().sealed) - set(played.values()))
    part = experiment["spider2"]
    assert part["base"]["n"] == part["trained"]["n"] == part["n"] == 48 and len(part["tasks"]) == 48
    assert [u["instance_id"] for u in part["unplayable"]] == absent
    for arm in ("base", "trained"):
        result = part[arm]
        assert 0 <= result["official"] <= len(played) and [u["instance_id"] for u in result["unplayable"]] == absent
        scored = chain.json(
            "score",
            "--spider2",
            "--results",
            result["results_dir"],
            "--gold",
            f"{SPIDER2_CHECKOUT}/evaluation_suite/gold",
        )
        assert result["evaluate_py"]["line"] == scored["official_line"]
        assert result["evaluate_py"]["submitted"] == scored["submitted"] <= len(played)
    folder = chain.work / "runs" / "experiments" / "tiny-cpu"
    assert (folder / "compare-spider2" / "compare.json").is_file()
    text = (folder / "report.md").read_text()
    assert "## Spider 2.0-DBT, sealed part" in text and all(f"`{i}` (base, trained)" in text for i in absent)
    ledger = [json.loads(x) for x in (chain.work / "pins" / "_spider2_audits.jsonl").read_text().splitlines()]
    assert sorted((e["arm"], e["event"]) for e in ledger if e["recipe"] == experiment["recipe"]) == [
        ("base", "result"),
        ("base", "start"),
        ("recipe", "result"),
        ("recipe", "start"),
    ]
    for arm in ("base", "recipe"):
        again = chain.run(
            "audit",
            "--benchmark",
            "spider2-dbt",
            "--split",
            "sealed",
            "--recipe",
            recipe_run,
            "--arm",
            arm,
            "--allow-unavailable",
            "--run-dir",
            f"runs/audit-spider2-again-{arm}",
            ok=False,
        )
        assert again.returncode == 1 and "already started its sealed Spider2 audit" in again.stderr
    assert len((chain.work / "pins" / "_spider2_audits.jsonl").read_text().splitlines()) == len(ledger)


def _machine_paths(folder: Path, needles: list[bytes]) -> list[str]:
    """Every file under ``folder`` (recursively) that holds one of ``needles``."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        blob = path.read_bytes()
        found += [f"{path}: {n.decode()}" for n in needles if n in blob]
    return found


LOAD_SCRIPT = (
    "import json, sys; from datasets import load_dataset; ds = load_dataset(sys.argv[1]); "
    "print(json.dumps({s: sorted(ds[s]['instance_id']) for s in ds}))"
)


@pytest.mark.slow
@pytest.mark.deep(
    covered_by=(
        "tests/harvester/test_add.py::test_a_package_repository_builds_its_integration_tests",
        "tests/harvester/test_add.py::test_repo_mirror_builds_owner_name_offline_with_the_pin_an_origin_copy_gets",
        "tests/corpora/test_dataset.py::test_cli_dataset_build",
        "tests/corpora/test_publish.py::test_upload_arrives_byte_identical",
        "tests/eval/test_audit.py::test_oracle_scores_n_of_n",
        "tests/train/test_sealed_chain.py::test_train_freeze_then_audit_the_sealed_split_once",
        "tests/train/test_sealed_chain.py::test_the_experiment_compares_base_and_trained_on_the_sealed_split_once_per_arm",
    )
)
def test_the_whole_chain_through_the_cli(tmp_path: Path) -> None:
    from dbt_harvest.harvester.example import materialize_example

    started = time.perf_counter()
    work = tmp_path / "work"
    work.mkdir()
    # --- the user's repositories: our four projects, and the example's package mirror ----------------
    example = materialize_example(tmp_path / "src" / "example")
    commits = {name: _git_repo(PROJECTS / name, tmp_path / "src" / name) for name in (*ORIGINS, PACKAGE)}
    with FakeHub() as hub:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("HARVEST_", "HF_"))},
            "HARVEST_HOME": str(work / ".harvest"),
            "HARVEST_PINS": str(work / "pins"),
            "HF_HOME": str(tmp_path / "hf-home"),
            "HF_ENDPOINT": hub.endpoint,
            "HF_TOKEN": "hf_e2e_token",
        }
        chain = Chain(work, env)

        # --- pin: each under its public origin, never its path ------------------------------------------
        added = {}
        for name, origin in ORIGINS.items():
            added[name] = chain.json("add", f"{tmp_path / 'src' / name}@{commits[name]}", "--origin", origin)
        added[PACKAGE] = chain.json(
            "add",
            f"{tmp_path / 'src' / PACKAGE}@{commits[PACKAGE]}",
            "--package-mirror",
            str(example.mirror),
            "--origin",
            PACKAGE_ORIGIN,
        )
        assert added[PACKAGE]["project_dir"] == "integration_tests"
        assert (
            added["lending_library"]["id"] == f"dbt-harvest-fixtures__lending_library@{commits['lending_library'][:12]}"
        )
        assert all(a["license"] == "Apache-2.0" for a in added.values())
        pin_ids = {name: a["id"] for name, a in added.items()}

        # --- reserve splits before minting: a test group, a dev group, the rest train -----------------
        event = chain.json("split", "assign", "--test-group", TEST_GROUP, "--dev-group", DEV_GROUP)["event"]
        assert sorted(event["splits"].values()) == ["dev", "test", "train", "train"]
        assert event["splits"][TEST_GROUP] == "test" and event["splits"][DEV_GROUP] == "dev"

        # --- mint with template statements (no --writer), bounded --------------------------------------
        minted = chain.json("mint", "--all", "--families", FAMILIES, "--max-per-model", "1", "--jobs", "2")
        per_pin = minted["tasks_per_pin"]
        assert per_pin.get(pin_ids[PACKAGE], 0) > 0, f"the package layout must mint train tasks: {per_pin}"
        counts = {
            "train": sum(per_pin.get(pin_ids[name], 0) for name in ("lending_library", PACKAGE)),
            "dev": per_pin.get(pin_ids["freight_ops"], 0),
            "test": per_pin.get(pin_ids["clinic_scheduling"], 0),
        }
        assert all(counts.values()), f"every split needs tasks: {counts} ({per_pin})"

        # --- the contamination lint passes on template statements from four repositories -------------
        lint = chain.run("lint", ok=False)
        assert lint.returncode == 0, lint.stdout + lint.stderr
        listed = chain.json("tasks", "list")["tasks"]
        assert {s: sum(t["split"] == s for t in listed) for s in ("train", "dev")} == {
            "train": counts["train"],
            "dev": counts["dev"],
        }

        # --- dataset build, and load_dataset of the folder ---------------------------------------------
        built = chain.json("dataset", "build", "--out", "dist/dbt-repair-v1")
        assert built["splits"] == {"train": counts["train"], "dev": counts["dev"]} and built["left_out_repos"] == 0
        folder = work / "dist" / "dbt-repair-v1"
        loaded = chain.python(LOAD_SCRIPT, str(folder))
        assert {s: len(ids) for s, ids in loaded.items()} == {"train": counts["train"], "dev": counts["dev"]}

        # --- publish: dev privately, then train into the same (private) repository; both load back -----
        dev = chain.json("publish", str(folder), "--repo-id", "acme/dbt-repair", "--split", "dev", "--private")
        train = chain.json("publish", str(folder), "--repo-id", "acme/dbt-repair", "--split", "train")
        assert dev["repo_private"] is True and train["card_splits"] == ["train", "dev"]
        from_hub = chain.python(LOAD_SCRIPT, "acme/dbt-repair", HF_HOME=str(tmp_path / "hf-reader"))
        assert from_hub == loaded
        public = chain.json("publish", str(folder), "--repo-id", "acme/dbt-repair-public", "--split", "train")
        assert public["repo_private"] is False
        refused = chain.run(
            "publish", str(folder), "--repo-id", "acme/dbt-repair-public", "--split", "dev", "--private", ok=False
        )
        assert refused.returncode == 1 and "exists and is public" in refused.stderr
        assert not any(p.startswith("data/dev-") for p in hub.files["acme/dbt-repair-public"])
        assert hub.unexpected == []

        # --- train a tiny adapter (no --json: the human output must exit 0 too), freeze it ------------
        trained = chain.run("train", "sft", "--config", str(SFT_CONFIG))
        assert "run:" in trained.stdout and "Traceback" not in trained.stderr
        manifest = json.loads((work / "runs" / "sft-e2e" / "manifest.json").read_text())
        # every train task trained, the package layout's (models outside project_dir) included
        assert manifest["dataset"]["tasks"] == counts["train"] and manifest["rows_left_out"] == []
        assert hub.unexpected == [], "training called the Hub (trl's telemetry must stay off)"
        chain.run("train", "freeze", "runs/sft-e2e")
        # every train task renders its rows and rewards 1 when fixed, 0 when not (the corpus run, on this corpus)
        fed = chain.json("corpus", "feed", "--out", "runs/feed")
        assert (fed["train_tasks"], fed["rendered"], fed["failed"]) == (counts["train"], counts["train"], {})
        assert fed["layouts"].get("built from integration_tests/", 0) == per_pin[pin_ids[PACKAGE]]
        assert (fed["reward"]["fixed_scores_1"], fed["reward"]["unrepaired_scores_0"]) == (counts["train"],) * 2
        assert (
            fed["investigation_lengths"]["episodes"] == 2 * counts["train"] and fed["investigation_lengths"]["min"] >= 1
        )
        assert set(fed["position_probe"]) >= {"accuracy", "chance", "rule", "held_out"}
        # run again with the same settings: every task's result was kept as it finished, nothing is rebuilt
        again = chain.json("corpus", "feed")
        assert (fed["resumed"], again["resumed"]) == (0, counts["train"])
        assert {k: v for k, v in again.items() if k not in ("seconds", "resumed")} == {
            k: v for k, v in fed.items() if k not in ("seconds", "resumed")
        }

        # --- the sealed test split: audited once for the frozen recipe, k/N over all of its tasks -----
        sealed = chain.json(
            "audit", "--split", "test", "--recipe", "runs/sft-e2e", "--run-dir", "runs/audit-test", "--max-turns", "3"
        )
        assert sealed["n"] == counts["test"] and 0 <= sealed["official"] <= sealed["n"]
        again = chain.run(
            "audit",
            "--split",
            "test",
            "--recipe",
            "runs/sft-e2e",
            "--run-dir",
            "runs/audit-test-2",
            "--max-turns",
            "3",
            ok=False,
        )
        assert again.returncode == 1 and again.stderr.startswith("error:")

        # --- dev: the oracle repairs every task, doing nothing repairs none ---------------------------
        oracle = chain.json("audit", "--split", "dev", "--driver", "oracle", "--run-dir", "runs/audit-dev-oracle")
        noop = chain.json("audit", "--split", "dev", "--driver", "noop", "--run-dir", "runs/audit-dev-noop")
        assert (oracle["official"], oracle["n"]) == (counts["dev"], counts["dev"])
        assert (noop["official"], noop["n"]) == (0, counts["dev"])

        # --- Spider 2.0-DBT: dev exported in its layout; a stand-in for its sealed part made of it, imported --
        (work / "tests" / "e2e").mkdir(parents=True)
        for name in RECIPE_FILES:  # where a clone has them: the recipe names its Spider2 checkout relative to it
            shutil.copy2(Path(__file__).resolve().parent / name, work / "tests" / "e2e" / name)
        played = spider2_stand_in(chain, counts["dev"])

        # --- the experiment: base vs trained on the sealed split and on Spider2's sealed part; killed after
        # training, then resumed ---------------------------------------------------------------------------
        state = work / "runs" / "experiments" / "tiny-cpu" / "experiment.json"

        def trained() -> bool:
            try:
                return "sft" in json.loads(state.read_text())["steps"]
            except (OSError, ValueError):
                return False

        # the example's sealed split cannot see a 10-point gain: the power step refuses before training
        refused = chain.run("experiment", EXPERIMENT, ok=False)
        assert refused.returncode == 1 and "error: the sealed split is underpowered" in refused.stderr
        assert sorted(json.loads(state.read_text())["steps"]) == ["dev-base"]
        assert chain.interrupted("experiment", EXPERIMENT, "--allow-underpowered", when=trained) == -signal.SIGKILL
        before = json.loads(state.read_text())["steps"]
        resumed = chain.run("experiment", EXPERIMENT, "--allow-underpowered", "--json")
        assert (
            "experiment: dev-base: done before, kept" in resumed.stderr and "sft: done before, kept" in resumed.stderr
        )
        experiment = json.loads(resumed.stdout)
        assert experiment["power"]["underpowered"] and experiment["power"]["base_rate_source"] == "dev-base audit"
        assert {k: experiment["seconds"][k] for k in before} == {k: v["seconds"] for k, v in before.items()}
        sealed_exp = experiment["sealed"]
        assert sealed_exp["base"]["n"] == sealed_exp["trained"]["n"] == sealed_exp["n"] == counts["test"]
        assert [t["instance_id"] for t in sealed_exp["tasks"]] == sorted(t["instance_id"] for t in sealed_exp["tasks"])
        assert (
            len(sealed_exp["tasks"]) == counts["test"]
            and sealed_exp["ci_low"] <= sealed_exp["difference"] <= sealed_exp["ci_high"]
        )
        assert experiment["dev"]["base"]["n"] == experiment["dev"]["trained"]["n"] == counts["dev"]
        assert experiment["gate"]["sft"]["total_steps"] == 2 and experiment["gate"]["grpo"]["total_steps"] == 1
        # GRPO continued the SFT adapter, and the recipe frozen and audited is the GRPO run
        sft_run, grpo_run = (work / experiment["training"][k]["run_dir"] for k in ("sft", "grpo"))
        grpo_manifest = json.loads((grpo_run / "manifest.json").read_text())
        sft_manifest = json.loads((sft_run / "manifest.json").read_text())
        assert grpo_manifest["init_adapter"]["sha256"] == sft_manifest["adapter_sha256"]
        assert experiment["recipe"].startswith("grpo-experiment@")
        for name in ("report.md", "report.json", "report.png"):
            assert (work / "runs" / "experiments" / "tiny-cpu" / name).stat().st_size > 0
        ledger = [json.loads(line) for line in (work / "pins" / "_test_audits.jsonl").read_text().splitlines()]
        arms = sorted(e.get("arm", "recipe") for e in ledger if e["recipe"] == experiment["recipe"])
        assert arms == ["base", "recipe"]  # each arm of the recipe audited once, both recorded
        recipe_run = experiment["training"]["grpo"]["run_dir"]
        for arm in ("base", "recipe"):
            again = chain.run(
                "audit",
                "--split",
                "test",
                "--recipe",
                recipe_run,
                "--arm",
                arm,
                "--run-dir",
                f"runs/audit-again-{arm}",
                ok=False,
            )
            assert again.returncode == 1 and "already" in again.stderr
        check_spider2_leg(chain, experiment, played, recipe_run)

        # --- report: the sealed audit's report rewritten from its run folder; noop vs oracle compared ----
        report = chain.json("audit", "report", "runs/audit-test")
        assert (report["split"], report["n"], report["official"]) == ("test", sealed["n"], sealed["official"])
        assert (work / "runs" / "audit-test" / "report.md").is_file()
        compared = chain.json("audit", "compare", "runs/audit-dev-noop", "runs/audit-dev-oracle")
        assert (compared["n"], compared["official_a"], compared["official_b"]) == (counts["dev"], 0, counts["dev"])
        assert compared["table"]["only_b"] == counts["dev"]

        # --- no committed artefact holds a path of this machine ----------------------------------------
        needles = sorted({str(p).encode() for p in (tmp_path, tmp_path.resolve(), ROOT)})
        published = tmp_path / "published"
        for repo_id, files in hub.files.items():
            for name, blob in files.items():
                (published / repo_id / name).parent.mkdir(parents=True, exist_ok=True)
                (published / repo_id / name).write_bytes(blob)
    leaks = (
        _machine_paths(work / "pins", needles) + _machine_paths(folder, needles) + _machine_paths(published, needles)
    )
    assert leaks == []
    card = (folder / "README.md").read_text()
    # no repository is named after a local copy (the card's column table documents `local://` itself)
    assert "dbt-harvest-fixtures/lending_library" in card and "local__" not in card and "local://local/" not in card
    # --- docs/CHAIN.md's walkthrough is what this test ran (every command, with the same options) ------
    ran = {_shape(call) for call in chain.calls}
    assert [c for c in chain_walkthrough() if c[:1] != ("demo",) and _shape(c) not in ran] == []
    print(
        f"\nchain wall time {time.perf_counter() - started:.0f} s; steps: "
        + ", ".join(f"{k} {v:.0f}s" for k, v in chain.timings.items())
    )
