"""The fault-injection harness: run the real CLI, kill it, check what it left, compare with a baseline.

Why it exists: the three crash test modules (add, mint, dataset build) share one shape. A *world* is a
HARVEST_HOME plus a pins folder (plus a dataset folder); a trial copies the world a command starts
from, runs the command in a subprocess through ``crashpoint.py`` and kills it with SIGKILL (at a
numbered crash point or after a delay), checks that everything left under a real name is whole and
verifies by its hash, re-runs the command uninterrupted, and compares the final artefacts byte for
byte with an uninterrupted run's.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CRASHPOINT = Path(__file__).resolve().parent / "crashpoint.py"
#: every artefact this test suite compares, relative to the world folder
SOURCE_DATE_EPOCH = "1704067200"


@dataclass(frozen=True)
class World:
    """One harvester state: HARVEST_HOME, the pins folder and where a dataset goes."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def pins(self) -> Path:
        return self.root / "pins"

    @property
    def dataset(self) -> Path:
        return self.root / "dist" / "crash-shop"

    def copy_to(self, dest: Path) -> World:
        shutil.copytree(self.root, dest, symlinks=True)
        return World(dest)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HARVEST_")}
        env.update(
            {
                "HARVEST_HOME": str(self.home),
                "HARVEST_PINS": str(self.pins),
                "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH,
                "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
                "HF_HUB_OFFLINE": "1",
                "TERM": "dumb",
            }
        )
        return env


@dataclass(frozen=True)
class Run:
    """How one CLI run ended."""

    returncode: int
    seconds: float
    output: str
    crash_point: str  # the crash point that killed it ('' when killed by delay or not killed)

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


def run_cli(
    world: World,
    args: list[str],
    *,
    crash_at: int = 0,
    kill_after: float | None = None,
    count_file: Path | None = None,
    timeout: float = 1800.0,
) -> Run:
    """Run ``harvest ARGS`` on ``world`` in a subprocess; SIGKILL it at ``crash_at`` or after ``kill_after`` s."""
    env = world.env()
    log = world.root / "crash.log"
    log.unlink(missing_ok=True)
    if crash_at:
        env["HARVEST_CRASH_AT"] = str(crash_at)
        env["HARVEST_CRASH_LOG"] = str(log)
    if count_file is not None:
        env["HARVEST_CRASH_COUNT"] = str(count_file)
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, str(CRASHPOINT), *args],
        env=env,
        cwd=world.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = proc.communicate(timeout=kill_after if kill_after is not None else timeout)
    except subprocess.TimeoutExpired:
        if kill_after is None:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"harvest {' '.join(args)} ran past {timeout:.0f} s") from None
        proc.send_signal(signal.SIGKILL)  # kill -9 of the running CLI
        output, _ = proc.communicate()
    point = log.read_text().strip() if log.is_file() else ""
    return Run(proc.returncode, time.monotonic() - started, output, point)


def hash_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def hashes(folder: Path, pattern: str = "**/*") -> dict[str, str]:
    """relative path -> sha256 of every regular file under ``folder`` matching ``pattern``."""
    if not folder.is_dir():
        return {}
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.glob(pattern))
        if p.is_file() and not p.is_symlink()
    }


def whole_files(folder: Path, pattern: str) -> dict[str, str]:
    """Like :func:`hashes` but only files under their real names (atomic writes' temp files start with '.')."""
    return {k: v for k, v in hashes(folder, pattern).items() if not any(part.startswith(".") for part in k.split("/"))}


def check_nothing_partial(world: World) -> list[str]:
    """Every artefact under a real name is whole and verifies by its hash; returns what was checked."""
    from dbt_harvest.core.pin import list_pins
    from dbt_harvest.core.task_record import read_task
    from dbt_harvest.corpora.build import read_manifest
    from dbt_harvest.harvester.gold import gold_path, matches
    from dbt_harvest.harvester.state import load_state

    checked: list[str] = []
    saved = {k: os.environ.get(k) for k in ("HARVEST_HOME", "HARVEST_PINS")}
    os.environ["HARVEST_HOME"], os.environ["HARVEST_PINS"] = str(world.home), str(world.pins)
    try:
        for gold in sorted((world.home / "gold").glob("*.duckdb")):
            assert matches(gold, gold.stem), (
                f"gold file {gold.name} does not hash to its name (a partial file under a real name)"
            )
            checked.append(f"gold/{gold.name}")
        for pin in list_pins(world.pins):  # PinError on a partial pin file
            gold_path(pin.gold_sha256, verify=True)  # a pin never exists without its verified gold
            load_state(pin.id)  # nor without its verified built state
            checked.append(f"pin {pin.id}")
        for task in sorted((world.home / "tasks").glob("*/*.json")):
            read_task(task)  # TaskRecordError on a partial record
            checked.append(f"task {task.name}")
        for report in sorted((world.home / "mint").glob("*/*.json")):
            import json

            json.loads(report.read_text())
        if world.dataset.exists():
            read_manifest(world.dataset)  # re-hashes every file the build listed
            checked.append("dataset")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return checked


@dataclass(frozen=True)
class Stage:
    """One command under test: the world it starts from, its arguments, and its uninterrupted result."""

    name: str
    args: tuple[str, ...]
    start: World
    final: dict[str, str]  # the compared artefacts of the uninterrupted run
    crash_points: int
    seconds: float


def trial_plan(stage: Stage, index: int, seed: int) -> tuple[int, float | None]:
    """(crash point, delay) of trial ``index``: even trials die at a numbered point, odd ones after a delay.

    The points are a seeded permutation of 1..crash_points, so trials hit distinct points until every
    point has been hit once.
    """
    if index % 2 == 0:
        order = random.Random(f"{seed}:{stage.name}:points").sample(
            range(1, stage.crash_points + 1), stage.crash_points
        )
        return order[(index // 2) % len(order)], None
    return 0, random.Random(f"{seed}:{stage.name}:{index}").uniform(0.2, stage.seconds)


def _decisions(world: World) -> dict[str, str]:
    """Per-candidate mint decisions without their timings (timings live only in the reports)."""
    import json

    out = {}
    for path in sorted((world.home / "mint").glob("*/*.json")):
        report = json.loads(path.read_text())
        report.pop("timings", None)
        out[f"report/{path.name}"] = hashlib.sha256(json.dumps(report, sort_keys=True).encode()).hexdigest()
    return out


def final_artefacts(stage: str, world: World) -> dict[str, str]:
    """What must come out byte-identical for ``stage``: pins and gold, task records, or the dataset."""
    if stage == "add":
        return {
            **{f"pins/{k}": v for k, v in whole_files(world.pins, "*.toml").items()},
            **{f"gold/{k}": v for k, v in whole_files(world.home / "gold", "*").items()},
        }
    if stage == "mint":
        return {
            **{f"tasks/{k}": v for k, v in whole_files(world.home / "tasks", "**/*.json").items()},
            **{f"mint/{k}": v for k, v in whole_files(world.home / "mint", "*/shards/*.done").items()},
            **_decisions(world),
        }
    if stage == "dataset":
        return {f"dataset/{k}": v for k, v in hashes(world.dataset).items()}
    raise KeyError(stage)


@dataclass(frozen=True)
class Baselines:
    """The session's three uninterrupted stages (tests/crash/conftest.py builds them once per run)."""

    repo_spec: str
    add: Stage
    mint: Stage
    dataset: Stage
    gold_of_each_build: tuple[
        str, ...
    ]  # sha256 of the gold each of the two builds of `add` captured (the host copy, buildN.captured/)
    finished: World  # the world after all three commands (read-only: copy it before changing anything)
    gold_names: tuple[str, ...]  # the content digest of each capture (harvester.gold_digest): the gold's name
