"""Problem statements: what a data consumer would observe, in the project's own business words.

Written from the graded tables' model and column descriptions (schema YAML, via dbt's manifest) and
the observed damage (rows missing or extra; a column too high or too low, true too often or too
rarely, empty where it should hold a value), never the fix, the operator, the edited line or any gold
value. ``leaks`` checks that mechanically; a writer model (optional, OpenAI-compatible) gets the same
check and the template is the fallback.

The template is data: every sentence it writes is a format string below, and the opening changes with
the first symptom, so statements of different tasks differ in more than their names. What stays fixed
is public (this file): :func:`fixed_phrases` derives the template's own word sequences from these
format strings, and the contamination lint (``corpora.digest``) discounts them, so it compares what is
specific to a task (table, column and description words), not the generator's boilerplate.
"""

from __future__ import annotations

import os
import re
import string
from dataclasses import dataclass
from functools import lru_cache

from dbt_harvest.core.closing import CLOSINGS, REPAIR_TESTED

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"\w+", re.UNICODE)

#: direction of a graded column's damage, as the confirmed build measured it (``mint/observe.py``); ``missing``:
#: the broken table has no such column at all (a fix mined from history that added it, undone)
DIRECTIONS = ("higher", "lower", "true_more", "true_less", "nulls_more", "nulls_less", "different", "missing")

#: The first sentence, by the first symptom: rows added, rows lost, or values changed.
OPENINGS: dict[str, str] = {
    "more_rows": "People who use the outputs of this dbt project count more rows than its rules produce.",
    "fewer_rows": "People who use the outputs of this dbt project find rows missing that its rules produce.",
    "values": "People who use the outputs of this dbt project find figures that break its documented rules.",
}
#: What happened to a table's rows (the symptom only: extra rows may be let-through records or a finer grain).
ROWS: dict[str, str] = {
    "more_rows": "{table}{about} has more rows than it should.",
    "fewer_rows": "{table}{about} is missing rows that it should have.",
}
#: How each direction of a column reads to a data consumer; every phrase says exactly what the task's
#: claim of that kind asserts (``mint/claims.py`` checks it), no more and no less.
COLUMN_WORDS: dict[str, str] = {
    "higher": "comes out too high",
    "lower": "comes out too low",
    "nulls_more": "is empty (NULL) in rows where it should have a value",
    "nulls_less": "has a value in rows where it should be empty (NULL)",
    "true_more": "is true for more rows than it should be",
    "true_less": "is true for fewer rows than it should be",
    "different": "holds wrong values for some rows",
    "missing": "is missing: the table has no such column",
}
#: What happened to one column (rows unchanged), by direction.
COLUMNS: dict[str, str] = {direction: "{column}{about} " + words for direction, words in COLUMN_WORDS.items()}
#: How the columns of one table are introduced.
COLUMNS_OF = "In {table}{about}, {observed}."
#: Said when no symptom could be put into words.
FALLBACK = "Some reported figures do not match what the business expects."
#: The last sentences of a task whose broken lineage dbt tests cover; one that no test covers closes with
#: ``core.closing.REPAIR_UNTESTED`` instead, which names no test (a statement never claims tests that do not exist).
CLOSING = REPAIR_TESTED
#: At most this many columns are named per table.
MAX_COLUMNS = 3


@dataclass(frozen=True)
class Symptom:
    table: str  # model name as users know it
    description: str  # the model's own description ('' when undocumented)
    gold_rows: int
    mutant_rows: int
    columns: tuple[tuple[str, str, str], ...]  # (column, description, direction: one of DIRECTIONS)

    @property
    def kind(self) -> str:
        """``more_rows``, ``fewer_rows`` or ``values``."""
        if self.mutant_rows > self.gold_rows:
            return "more_rows"
        if self.mutant_rows < self.gold_rows:
            return "fewer_rows"
        return "values"


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".")


def _about(description: str) -> str:
    return f" ({_first_sentence(description)})" if description else ""


def _table_sentences(s: Symptom) -> list[str]:
    table, about = f"`{s.table}`", _about(s.description)
    if s.kind in ROWS:
        return [ROWS[s.kind].format(table=table, about=about)]
    observed = [
        COLUMNS.get(direction, COLUMNS["different"]).format(column=f"`{column}`", about=_about(description))
        for column, description, direction in s.columns[:MAX_COLUMNS]
    ]
    return [COLUMNS_OF.format(table=table, about=about, observed="; ".join(observed))] if observed else []


def template_statement(symptoms: list[Symptom], closing: str = CLOSING) -> str:
    """The statement the template writes for ``symptoms`` (most downstream table first), ending with
    ``closing`` (``core.closing.repair_closing`` of the task's local checks)."""
    parts = [sentence for s in symptoms for sentence in _table_sentences(s)]
    if not parts:
        return f"{FALLBACK} {closing}"
    opening = OPENINGS[next((s.kind for s in symptoms if _table_sentences(s)), "values")]
    return " ".join([opening, *parts, closing])


def _templates() -> tuple[str, ...]:
    from dbt_harvest.harvester.mint.contract import templates as completion_templates

    return (
        *OPENINGS.values(),
        *ROWS.values(),
        *COLUMNS.values(),
        COLUMNS_OF,
        FALLBACK,
        *CLOSINGS,
        *completion_templates(),
    )


@lru_cache(maxsize=1)
def fixed_phrases(min_words: int = 3) -> tuple[tuple[str, ...], ...]:
    """The template's own word sequences (lower-case words, as the lint tokenises), longest first.

    Derived from the format strings above: every literal stretch between two placeholders of at least
    ``min_words`` words. Shorter stretches ("In") are left in: discounting common words would cut a
    task's own description into pieces too short to compare.
    """
    found: set[tuple[str, ...]] = set()
    for template in _templates():
        for literal, *_ in string.Formatter().parse(template):
            words = tuple(w.lower() for w in _WORD.findall(literal))
            if len(words) >= min_words:
                found.add(words)
    return tuple(sorted(found, key=lambda w: (-len(w), w)))


def leaks(statement: str, forbidden_spans: list[str], documented: str = "") -> list[str]:
    """What in ``statement`` gives the answer away: a changed span's text, or a number that is neither
    inside a name nor quoted from the project's own documentation (``documented``)."""
    found: list[str] = []
    squashed = " ".join(statement.split()).lower()
    for span in forbidden_spans:
        norm = " ".join(span.split()).lower()
        if len(norm) >= 4 and not _IDENT.fullmatch(norm) and norm in squashed:
            found.append(f"span {span!r}")
    without_names = re.sub(r"`[^`]*`|[A-Za-z_][A-Za-z0-9_]*", " ", statement)
    allowed = set(re.findall(r"\d+(?:\.\d+)?", documented))
    numbers = set(re.findall(r"\d+(?:\.\d+)?", without_names))
    if numbers - allowed:
        found.append("a number")
    return found


def writer_statement(
    url: str, symptoms: list[Symptom], model: str = "default", timeout: float = 60.0, closing: str = CLOSING
) -> str:
    """Ask an OpenAI-compatible endpoint (through the openai SDK, at ``url``) to rewrite the template in
    plain business words. Raises OSError when the endpoint cannot be reached or refuses, ValueError when
    its answer holds no text (statement_for then keeps the template)."""
    import openai

    draft = template_statement(symptoms, closing)
    client = openai.OpenAI(
        base_url=url.rstrip("/"), api_key=os.environ.get("OPENAI_API_KEY") or "no-key", timeout=timeout, max_retries=2
    )
    try:
        answer = client.chat.completions.create(
            model=model,
            temperature=0,
            messages=[
                {
                    "role": "system",
                    "content": "Rewrite this bug report as a data consumer would write it. Do not "
                    "mention SQL, code, numbers, or how to fix it. Keep table and column names in backticks.",
                },
                {"role": "user", "content": draft},
            ],
        )
    except openai.APIError as exc:
        raise OSError(f"statement writer at {url}: {exc}") from None
    try:
        content = answer.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        raise ValueError(f"statement writer at {url} answered without a message") from None
    if not content:
        raise ValueError(f"statement writer at {url} answered an empty message")
    return str(content).strip()


def _documented(symptoms: list[Symptom]) -> str:
    return " ".join([s.description for s in symptoms] + [c[1] for s in symptoms for c in s.columns])


def statement_for(
    symptoms: list[Symptom], forbidden_spans: list[str], writer: str | None = None, closing: str = CLOSING
) -> str:
    """The writer's statement when it exists and does not leak, else the template (which must not leak);
    ``closing``: the template's last sentences (:func:`template_statement`)."""
    if writer:
        try:
            text = writer_statement(writer, symptoms, closing=closing)
            if text and not leaks(text, forbidden_spans, _documented(symptoms)):
                return text
        except (OSError, ValueError, KeyError):
            pass
    text = template_statement(symptoms, closing)
    bad = leaks(text, forbidden_spans, _documented(symptoms))
    if bad:
        raise ValueError(f"problem statement leaks {', '.join(bad)}")
    return text
