"""Offline checks of a committed ``pins/`` folder: what CI can verify without fetching any repository.

:func:`check_pins_folder` returns one line per problem (empty: the folder is sound):
  pin            every ``*.toml`` parses and its digest verifies; its compat patch is stored with it and hashes
  machine-path   no pin (or stored patch) records a path of the machine that made it (a local mirror, a home folder)
  origin         every pin's repository is recorded under a public URL (``https://...``), and so is every package
  ledger         ``_splits.jsonl`` parses and its hash chain verifies; every pin's repository is reserved
  groups         no split group has members on two sides (and the lint's pin-level checks pass: benchmark
                 exclusions, shared model files across the line)
  license        a repository whose license does not allow redistribution is reserved only for the sealed test split
  lock           ``_tasks.lock`` parses, is canonical, and agrees with the ledger (see corpora.tasklock)

`harvest corpus check` prints them; tests/corpora/test_committed_pins.py runs them over the repository's ``pins/``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from dbt_harvest.core.errors import PinError
from dbt_harvest.core.licenses import REDISTRIBUTABLE
from dbt_harvest.core.pin import Pin, read_pin
from dbt_harvest.corpora.errors import CorporaError
from dbt_harvest.corpora.exclusions import load_exclusions
from dbt_harvest.corpora.ledger import SplitLedger
from dbt_harvest.corpora.lint import lint
from dbt_harvest.corpora.tasklock import check_against_ledger, read_lock

#: what a path of the machine that made a pin looks like (absolute POSIX or Windows paths, file:// URLs)
MACHINE_PATH = re.compile(
    r"""(?:^|["'\s=])(?:/(?:work|home|root|tmp|Users|var|opt|mnt|srv|private)/|[A-Za-z]:\\|file://)"""
)


def _pin_problems(path: Path, pins: Path) -> tuple[Pin | None, list[str]]:
    try:
        pin = read_pin(path)
    except PinError as exc:
        return None, [f"pin: {exc}"]
    problems = []
    text = path.read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        if MACHINE_PATH.search(line):
            problems.append(f"machine-path: {path.name}:{number} records a local path: {line.strip()[:120]}")
    if not pin.url.startswith("https://"):
        problems.append(f"origin: {pin.id} is recorded under {pin.url!r}, not a public https URL")
    for pkg in pin.packages:
        if pkg.url and not pkg.url.startswith("https://"):
            problems.append(
                f"origin: {pin.id} package {pkg.name} is recorded under {pkg.url!r}, not a public https URL"
            )
    if pin.compat_patch_sha256:
        stored = pins / "patches" / f"{pin.compat_patch_sha256}.diff"
        if not stored.is_file():
            problems.append(f"pin: {pin.id} names compat patch {pin.compat_patch_sha256[:12]} but {stored} is missing")
        else:
            body = stored.read_bytes()
            if hashlib.sha256(body).hexdigest() != pin.compat_patch_sha256:
                problems.append(f"pin: {stored.name} does not hash to its name (edited after pinning)")
            if any(MACHINE_PATH.search(line) for line in body.decode("utf-8", "replace").splitlines()):
                problems.append(f"machine-path: {stored.name} records a local path")
    if pin.augmentation_sha256:
        if not (pins / f"{pin.augments}.toml").is_file():
            problems.append(f"pin: {pin.id} augments {pin.augments}, which is not pinned")
        if not pin.recovers:
            problems.append(f"pin: {pin.id} records no candidates (`recovers`), so a rebuild cannot mint it as it was")
        if (pins / "patches" / f"{pin.augmentation_sha256}.diff").is_file():
            problems.append(
                f"pin: {pin.id}'s augmentation patch sits beside the compat patches; it carries rows "
                "cloned from the repository's seeds and belongs under patches/augmentations/ (not committed)"
            )
    if pin.is_history and not (pins / f"{pin.mined_from}.toml").is_file():
        problems.append(
            f"pin: {pin.id} was mined from {pin.mined_from}, which is not pinned (`harvest mine "
            f"{pin.mined_from} --rebuild` re-pins it from there)"
        )
    return pin, problems


def check_pins_folder(pins: Path) -> list[str]:
    """Every problem of the committed folder ``pins`` (see the module docstring); [] when sound."""
    problems: list[str] = []
    found: list[Pin] = []
    for path in sorted(pins.glob("*.toml")):
        if path.name.startswith("_"):
            continue
        pin, more = _pin_problems(path, pins)
        problems += more
        if pin is not None:
            found.append(pin)
    try:
        ledger = SplitLedger.load(pins)
    except CorporaError as exc:
        return problems + [f"ledger: {exc}"]
    splits: dict[str, str] = {}
    for pin in found:
        assignment = ledger.assignment(pin)
        if assignment is None:
            continue  # the lint below reports it (unassigned)
        splits[pin.id] = assignment.split
        if assignment.split != "test" and pin.license not in REDISTRIBUTABLE:
            problems.append(
                f"license: {pin.id} ({pin.license}) is reserved for {assignment.split}; only the sealed "
                "test split may hold a repository whose license does not allow redistribution"
            )
    problems += [
        f"groups: {v.kind} {v.subject}: {v.evidence}" for v in lint(found, [], load_exclusions(), splits=splits)
    ]
    try:
        lock = read_lock(pins)
    except CorporaError as exc:
        return problems + [f"lock: {exc}"]
    if lock is not None:
        problems += [f"lock: {p}" for p in check_against_ledger(lock, pins)]
    return problems
