"""Problem statements: what a data consumer would observe, in the project's own business words.

Written from the graded tables' model and column descriptions (schema YAML, via dbt's manifest) and
the direction of the damage (too many rows, rows missing, values too high or too low), never the
fix, the operator, the edited line or any gold value. ``leaks`` checks that mechanically; a writer
model (optional, OpenAI-compatible) gets the same check and the template is the fallback.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Symptom:
    table: str  # model name as users know it
    description: str  # the model's own description ('' when undocumented)
    gold_rows: int
    mutant_rows: int
    columns: tuple[tuple[str, str, str], ...]  # (column, description, direction: 'higher'|'lower'|'different')


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".")


def template_statement(symptoms: list[Symptom]) -> str:
    parts: list[str] = []
    for s in symptoms:
        what = f"`{s.table}`" + (f" ({_first_sentence(s.description)})" if s.description else "")
        if s.mutant_rows > s.gold_rows:
            parts.append(f"{what} has more rows than it should: some records are counted that the business rules exclude.")
        elif s.mutant_rows < s.gold_rows:
            parts.append(f"{what} is missing rows: records that should be there are not.")
        observed = []
        for column, description, direction in s.columns[:3]:
            label = f"`{column}`" + (f" ({_first_sentence(description)})" if description else "")
            if direction == "higher":
                observed.append(f"{label} comes out too high")
            elif direction == "lower":
                observed.append(f"{label} comes out too low")
            else:
                observed.append(f"{label} holds wrong values for some rows")
        if observed:
            parts.append(f"In {what}, " + "; ".join(observed) + ".")
    body = " ".join(parts) or "Some reported figures do not match what the business expects."
    return (
        "Data consumers report that a table of this dbt project is wrong. " + body
        + " The project builds and you may run its dbt tests. Find the cause in the project's models and "
        "fix it so that the outputs follow the business rules the project documents."
    )


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


def writer_statement(url: str, symptoms: list[Symptom], model: str = "default", timeout: float = 60.0) -> str:
    """Ask an OpenAI-compatible endpoint (through the openai SDK, at ``url``) to rewrite the template in
    plain business words. Raises OSError when the endpoint cannot be reached or refuses, ValueError when
    its answer holds no text (statement_for then keeps the template)."""
    import openai

    draft = template_statement(symptoms)
    client = openai.OpenAI(base_url=url.rstrip("/"), api_key=os.environ.get("OPENAI_API_KEY") or "no-key",
                           timeout=timeout, max_retries=2)
    try:
        answer = client.chat.completions.create(model=model, temperature=0, messages=[
            {"role": "system", "content": "Rewrite this bug report as a data consumer would write it. Do not "
             "mention SQL, code, numbers, or how to fix it. Keep table and column names in backticks."},
            {"role": "user", "content": draft},
        ])
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


def statement_for(symptoms: list[Symptom], forbidden_spans: list[str], writer: str | None = None) -> str:
    """The writer's statement when it exists and does not leak, else the template (which must not leak)."""
    if writer:
        try:
            text = writer_statement(writer, symptoms)
            if text and not leaks(text, forbidden_spans, _documented(symptoms)):
                return text
        except (OSError, ValueError, KeyError):
            pass
    text = template_statement(symptoms)
    bad = leaks(text, forbidden_spans, _documented(symptoms))
    if bad:
        raise ValueError(f"problem statement leaks {', '.join(bad)}")
    return text
