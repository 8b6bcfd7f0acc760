"""The one verdict on an edited task: what every grader of edits answers, whichever path built it.

The scorer (``core.scorer``) answers a ``Score`` about tables: two verdicts with their reasons and
per-table detail. Grading an edited *task* also says whether the project built, which of its dbt tests
failed, and which path produced the answer. ``Graded`` is that answer, and the only one: the mint's
confirmation, the environment's ``validate``/``submit``, the GRPO reward (every backend) and the audit
all read it. Before it, three classes flattened the scorer's verdicts into ``{official, strict,
reason}`` in three ways (the reward's, the fast engine's and the environment's submission).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.scorer.verdict import Score

#: how the verdict was reached: compiled SQL in the locked engine, an incremental sandboxed dbt build,
#: a full sandboxed dbt build, the agent's own workspace built by the environment, the SQL-only backend,
#: or no build at all (the edit was refused before any build)
PATHS = ("fast", "dbt", "naive", "workspace", "sql", "refused")


@dataclass(frozen=True)
class Graded:
    """One edited task, graded: the scorer's two verdicts as bits, why a bit is 0, and what the build
    showed. ``failed_tests`` is filled when the project's dbt tests were run; ``capture`` is a file of the
    graded tables for the scorer's explainer (only when asked for); ``blocking_failures`` are failing
    error-severity tests whose model has children in the build (dbt would skip them: the fast path then
    hands the edit to dbt)."""

    official: int
    strict: int
    reason: str = ""
    built: bool = True
    first_error: str = ""
    tests_total: int = 0
    failed_tests: tuple[str, ...] = ()
    capture: Path | None = None
    path: str = ""
    seconds: float = 0.0
    blocking_failures: tuple[str, ...] = ()

    @property
    def tests_failed(self) -> int:
        return len(self.failed_tests)

    @property
    def local_checks_pass(self) -> bool:
        """The project builds and every dbt test that ran passes (what an agent can see for itself)."""
        return self.built and not self.failed_tests

    @classmethod
    def from_score(cls, score: Score, **build: Any) -> Graded:
        """The scorer's two verdicts as bits; the reason is the official check's, else the strict one's."""
        official, strict = score.official.score, score.strict.score
        reason = "" if official and strict else (score.official.reason or score.strict.reason)
        return cls(official, strict, reason, **build)

    @classmethod
    def not_built(cls, reason: str, first_error: str = "", **build: Any) -> Graded:
        """A 0 under both checks because nothing could be graded (a failed or refused build)."""
        return cls(0, 0, reason, built=False, first_error=first_error or reason, **build)

    def to_dict(self) -> dict[str, Any]:
        """The environment's and the audit's view. ``capture`` is a host path and stays out; so does
        ``path``: which path graded a submission must not change its audit record."""
        return {
            "built": self.built,
            "first_error": self.first_error,
            "tests_total": self.tests_total,
            "tests_failed": self.tests_failed,
            "failed_tests": list(self.failed_tests),
            "local_checks_pass": self.local_checks_pass,
            "official": self.official,
            "strict": self.strict,
            "wall_s": round(self.seconds, 3),
        }


def grade_build(
    gold: Path,
    built: Path | None,
    grading: GradingSpec,
    *,
    built_ok: bool,
    first_error: str = "",
    tests_total: int = 0,
    failed_tests: tuple[str, ...] = (),
    capture: Path | None = None,
    path: str = "",
    seconds: float = 0.0,
) -> Graded:
    """A finished build of an edited project, graded: 0 and 0 with the build's error when it failed or
    captured nothing, else the scorer's verdicts on ``built`` (a capture of its tables) against ``gold``.
    The dbt strategies of ``grade``, the environment's workspace build and the mint's confirmation all
    turn a build into a verdict here."""
    from dbt_harvest.core.scorer import score

    facts: dict[str, Any] = {
        "tests_total": tests_total,
        "failed_tests": tuple(sorted(failed_tests)),
        "path": path,
        "seconds": seconds,
    }
    if not built_ok or built is None:
        return Graded.not_built(f"build failed: {first_error}", first_error, **facts)
    return Graded.from_score(score(gold, built, grading), capture=capture, **facts)


__all__ = ["PATHS", "Graded", "grade_build"]
