"""A history pin's one candidate: its fix file's parent text is the bug, the fix its true repair.

The candidate is shaped like a planted mutation (``mint.candidates.Candidate``) so that the mint screens,
confirms, grades and states it exactly as it does every other task: ``original`` is the fixed file (what the
pin's tree holds and gold was built from), the "mutation" is the one edit back to the parent's text.

Its wrong repairs are what an engineer chasing the symptom might write instead of the fix, each an edit of
the parent's text: half of the fix (when the fix changed several places, each place alone and all but one of
them) alternating with the fix with a slip (a mutant of the fixed file, the mutators' own operators, those
touching the fixed lines first). Which of them builds, passes the local checks and still scores 0 is measured by the mint.
"""

from __future__ import annotations

import difflib
from itertools import combinations, zip_longest

import pygit2

from dbt_harvest.core.pin import Pin
from dbt_harvest.harvester.history.fix import Fix, pin_fix
from dbt_harvest.harvester.mint.candidates import Candidate
from dbt_harvest.mutators import Mutation, WrongRepair, difference
from dbt_harvest.mutators import candidates as mutations_of

#: the operator and family of every history task (its id segment, its row's family)
HISTORY_OPERATOR = HISTORY_FAMILY = "history"
#: mutants of the fixed file offered as wrong repairs, at most (8 found no informative one for
#: fivetran/dbt_snapchat_ads's fix of its url report; its 12th slip, a negated filter, is one)
MAX_SLIPS = 24


def _hunks(before: str, after: str) -> list[tuple[int, int, list[str]]]:
    """The fix's changed places as (first line, last line + 1 of ``before``, replacement lines)."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    return [
        (i1, i2, b[j1:j2])
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        if tag != "equal"
    ]


def partial_fixes(before: str, after: str) -> list[str]:
    """The fix applied in part: each changed place alone, and every place but one (no duplicates, neither
    the parent's text nor the whole fix)."""
    hunks = _hunks(before, after)
    if len(hunks) < 2:
        return []
    lines = before.splitlines(keepends=True)
    subsets = [(h,) for h in hunks] + (list(combinations(hunks, len(hunks) - 1)) if len(hunks) > 2 else [])
    out: list[str] = []
    for subset in subsets:
        text = list(lines)
        for start, end, replacement in sorted(subset, key=lambda h: -h[0]):
            text[start:end] = replacement
        joined = "".join(text)
        if joined not in (before, after) and joined not in out:
            out.append(joined)
    return out


def slips(after: str, near: tuple[int, int]) -> list[tuple[str, str]]:
    """Mutants of the fixed text as (text, what the slip does), those overlapping ``near`` (a character span
    of the fix in ``after``) first, at most ``MAX_SLIPS``."""
    found = mutations_of(after)

    def distance(m: Mutation) -> int:
        return max(0, m.edit.start - near[1], near[0] - m.edit.end)

    ordered = sorted(found, key=lambda m: (distance(m), m.edit.start, m.operator))
    out: list[tuple[str, str]] = []
    for mutation in ordered:
        text = mutation.edit.apply(after)
        if text not in (t for t, _ in out):
            out.append((text, mutation.description))
        if len(out) >= MAX_SLIPS:
            break
    return out


def history_candidate(pin_id: str, model: str, file: str, fix: Fix) -> Candidate | None:
    """The candidate of a history pin's fix file (None when the fix did not change it or removed it)."""
    before, after = fix.text_before(file), fix.text_after(file)
    if before is None or after is None or before == after:
        return None
    back = difference(after, before)  # fixed -> parent: the "mutation"
    span = difference(before, after)  # where the fix lives in the fixed text: [start, start + len(replacement))
    near = (span.start, span.start + len(span.replacement))
    parts = [(text, "the fix in part") for text in partial_fixes(before, after)]
    slipped = [(text, f"the fix, with a slip: {what}") for text, what in slips(after, near) if text != before]
    wrong: list[WrongRepair] = []
    # alternated, so that a fix whose places only build together (a column and the join it needs) still
    # reaches its slips within the few wrong repairs confirmation builds
    for text, intent in (item for pair in zip_longest(parts, slipped) for item in pair if item is not None):
        edit = difference(before, text)
        wrong.append(WrongRepair(edit.start, edit.end, edit.replacement, intent=intent))
    mutation = Mutation(
        operator=HISTORY_OPERATOR,
        family=HISTORY_FAMILY,
        effect="changed_rows",
        edit=back,
        wrong_repairs=tuple(wrong),
        description=f"the model as it was before commit {fix.commit[:12]}",
    )
    return Candidate(pin=pin_id, model=model, file=file, original=after, mutation=mutation, planted=False)


def provenance(pin: Pin, repo: pygit2.Repository) -> dict[str, str]:
    """The task record fields of a history pin's tasks: source, fix commit, its date and subject line."""
    commit = repo.revparse_single(pin.fix_commit).peel(pygit2.Commit)
    return {
        "source": "history",
        "fix_commit": pin.fix_commit,
        "fix_date": pin.fix_date,
        "fix_subject": commit.message.partition("\n")[0].strip(),
    }


def pin_candidates(pin: Pin, model: str, file: str | None) -> tuple[list[Candidate], dict[str, str]]:
    """A history pin's candidates for one model (its fix file's, else none) and its tasks' provenance."""
    from dbt_harvest.core.home import mirrors_dir
    from dbt_harvest.harvester.gitstore import GitStore

    repo = GitStore(mirrors_dir()).mirror(pin.url)
    fix = pin_fix(pin, repo)
    cand = history_candidate(pin.id, model, file, fix) if file in fix.files else None
    return ([cand] if cand is not None else []), provenance(pin, repo)
