"""The failure ladder: where an episode stopped on the way from "started" to "official pass".

Rungs, from the bottom (read top-down, the first that applies wins):

1. looped — the episode was ended for repeating one action (``looped``)
2. no submission — turn cap reached, the driver stopped, or nothing was submitted
3. build fails — submitted, but the final build of the project fails
4. local checks fail — it builds, but dbt tests fail
5. official fail — the local checks pass, but the official score is 0
6. official pass — the official score is 1 (whatever the dbt tests say)

The strict verdict is reported beside the rung, never folded into it. An episode that crashed or never
ran has no rung (``MISSING``); it counts 0 and is listed by the audit.
"""

from __future__ import annotations

from dataclasses import dataclass

from dbt_harvest.eval.env.episode import LOOPED, SUBMITTED, EpisodeOutcome

MISSING = 0
LOOPS, NO_SUBMISSION, BUILD_FAILS, CHECKS_FAIL, OFFICIAL_FAIL, OFFICIAL_PASS = 1, 2, 3, 4, 5, 6
RUNGS: dict[int, str] = {
    MISSING: "missing or crashed",
    LOOPS: "stopped looping on one action",
    NO_SUBMISSION: "no submission",
    BUILD_FAILS: "submitted, build fails",
    CHECKS_FAIL: "build ok, local checks fail",
    OFFICIAL_FAIL: "local checks pass, official 0",
    OFFICIAL_PASS: "official pass",
}


@dataclass(frozen=True)
class LadderVerdict:
    """One episode on the ladder, with the strict verdict beside it."""

    rung: int
    strict: int

    @property
    def label(self) -> str:
        return RUNGS[self.rung]


def classify(outcome: EpisodeOutcome | None) -> LadderVerdict:
    """The rung of an episode's outcome (``MISSING`` for None: a crashed or missing episode)."""
    if outcome is None:
        return LadderVerdict(MISSING, 0)
    if outcome.status == LOOPED:
        return LadderVerdict(LOOPS, 0)
    submission = outcome.submission
    if outcome.status != SUBMITTED or submission is None:
        return LadderVerdict(NO_SUBMISSION, 0)
    if submission.official:
        return LadderVerdict(OFFICIAL_PASS, submission.strict)
    if not submission.built:
        return LadderVerdict(BUILD_FAILS, 0)
    if not submission.local_checks_pass:
        return LadderVerdict(CHECKS_FAIL, submission.strict)
    return LadderVerdict(OFFICIAL_FAIL, submission.strict)
