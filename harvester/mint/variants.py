"""Variants of one pin, built one after another in one warm sandbox: mutants, repairs, wrong repairs.

Confirmation builds every variant the same way: the pin's tree with one file replaced, the pin's
built database as the starting point, ``dbt build --select <model>+`` (the model, its descendants and
their tests), then a capture of every model relation. A fresh child per variant spends most of its
time importing dbt and parsing the whole project; a ``VariantBuilder`` keeps one sandboxed child
alive for all the variants of a shard and, before each build, puts the workspace back to the pin's
state inside the sandbox (the file written, every other file it changed restored, the database
replaced by a pristine copy), so each build starts exactly where a fresh workspace would.

Builds are memoized on their input, the text of the replaced file: the same inputs give the same
outputs on every deterministic table (``harvest add`` built the pin twice to establish that). Every
true repair restores the model file byte for byte, so the candidates of one model share one repair
build instead of paying for one each.

The warm child runs the project's code between our batches, so the host never reads the live workspace:
a file's original text comes from the pin's template (the host's own copy, never bound into a
sandbox), captures come back as the runner's host copies, and the workspace is removed by fd.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from dbt_harvest.core.errors import BuildError
from dbt_harvest.core.pin import Pin
from dbt_harvest.harvester.build import BuildResult, interpret
from dbt_harvest.harvester.discovery import discover
from dbt_harvest.harvester.sandbox import CaptureStep, DbtStep, Limits, RestoreDbStep, WriteStep, safe_fs, write_profile
from dbt_harvest.harvester.sandbox.session import SandboxSession
from dbt_harvest.harvester.workspace import fresh_workspace, template

BASE_DB = ".harvest_base.duckdb"
OUT_DIR = ".harvest_out"


class VariantBuilder:
    """Builds variants of ``pin`` in one warm sandboxed child, starting each from ``base_db``."""

    def __init__(self, pin: Pin, scratch: Path, *, base_db: Path, sandboxed: bool, limits: Limits) -> None:
        self.pin = pin
        self.scratch = scratch
        self.sandboxed = sandboxed
        self.limits = limits
        self.workspace = scratch / "variants"
        safe_fs.rmtree(self.workspace)
        fresh_workspace(pin, self.workspace)
        self.template = template(pin)
        shutil.copyfile(base_db, self.workspace / BASE_DB)
        (self.workspace / OUT_DIR).mkdir()
        profile = discover(self.workspace, pin.project_dir).profile
        write_profile(
            self.workspace,
            pin.project_dir,
            profile,
            pin.profile_schema,
            db_file=pin.db_file,
            exclude_tests=pin.excluded_tests,
            toolchain=pin.toolchain,
        )
        self._original: dict[str, str] = {}  # files this builder changed -> their text in the pin
        self._memo: dict[tuple[str, str, tuple[str, ...]], BuildResult] = {}
        self._outs: list[str] = []  # captures the child wrote in the workspace (their host copies are in the memo)
        self._count = 0
        self.builds = 0
        self.reused = 0
        self.session = SandboxSession(
            self.workspace,
            pin.project_dir,
            clock=pin.clock,
            sandboxed=sandboxed,
            limits=limits,
            log_path=scratch / "variants.log",
        )

    def __enter__(self) -> VariantBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def build(self, name: str, file: str, text: str, select: tuple[str, ...]) -> BuildResult:
        """Build ``select`` of the pin with ``file`` (relative to the repository root, like a task's file)
        holding ``text``; reuse an identical earlier build."""
        key = (file, hashlib.sha256(text.encode("utf-8")).hexdigest(), select)
        if key in self._memo:
            self.reused += 1
            return self._memo[key]
        steps: list[object] = []
        for changed, original in self._original.items():
            if changed != file:  # restored every time: idempotent, and right even after a killed batch
                steps.append(WriteStep(changed, original))
        if file not in self._original:
            self._original[file] = self._pinned_text(file)
        self._count += 1
        out = f"{OUT_DIR}/{self._count:05d}-{name}.duckdb"
        self._outs.append(out)
        steps += [
            WriteStep(file, text),
            RestoreDbStep(BASE_DB),
            DbtStep(("build", "--select", *select)),
            CaptureStep(out=out),
        ]
        run = self.session.run(steps, stop_on_failure=False)  # type: ignore[arg-type]
        self.builds += 1
        result = interpret(self.workspace, steps, run)
        if not (run.killed_reason or run.timed_out):
            self._memo[key] = result
        return result

    def _pinned_text(self, file: str) -> str:
        """``file`` as the pin has it: read from the template (never from the workspace the child writes)."""
        try:
            return safe_fs.read_text(self.template, file, max_bytes=safe_fs.READ_LIMIT)
        except (safe_fs.UnsafePathError, UnicodeDecodeError) as exc:
            raise BuildError(f"{self.pin.id}: {file} cannot be read from the pin's tree ({exc})") from None

    def forget(self) -> None:
        """Drop the memo and its captured files (the child stays warm): call between shards."""
        for result in self._memo.values():
            if result.gold_file is not None:
                result.gold_file.unlink(missing_ok=True)
        self._memo.clear()
        for out in self._outs:  # the child's own files in its workspace: removed by fd, never through a link
            for suffix in ("", ".wal"):
                try:
                    safe_fs.remove(self.workspace, out + suffix)
                except safe_fs.UnsafePathError:
                    pass  # a link on the way: nothing of ours to remove there
        self._outs.clear()

    def close(self) -> None:
        self.session.close()


__all__ = ["VariantBuilder"]
