"""Task digests: what the contamination lint needs to know about a task, without its content.

A sealed test task may not be read outside the audit's unseal path, yet the lint must compare test
problem statements with training ones. A digest carries the pin, split, group, mutated file and the
*hashed* word 13-grams of the problem statement, so the comparison needs no plaintext from the sealed side.

Only what is specific to a task counts: the statement template's fixed phrases (derived from the
template's own format strings, ``harvester.mint.statement.fixed_phrases``) are cut out of the word
stream first, and 13-grams are taken within the runs of words left between them. Two template
statements therefore never collide on the generator's boilerplate, while a task's own words (its
tables, columns and the project's descriptions) still must not be shared across the train/eval line.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from dbt_harvest.core.task_record import TaskRecord

NGRAM = 13
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class TaskDigest:
    instance_id: str
    pin: str
    split: str
    split_group: str
    file: str
    ngrams: frozenset[str]  # sha256[:16] of each normalised 13-gram of task-specific words
    statement_sha: str = ""  # sha256 of the whole statement's normalised words (an exact copy, however short)
    # sha256[:16] of each documented-column line of a completion statement ("- `name`: description"), with
    # the sha256[:16] of its first word (the column's name) and its length in words
    column_lines: frozenset[tuple[str, str, int]] = frozenset()


#: how a completion statement lists one documented column (``harvester.mint.contract``)
COLUMN_LINE = "- `"


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def column_lines(text: str) -> frozenset[tuple[str, str, int]]:
    """(hash of its words, hash of its first word, its length in words) of each documented-column line of a
    completion statement: a project's own documentation of one column, which two repositories can share
    word for word (a vendor's doc block). Hashes only, so a sealed task's digest carries no text."""
    out: set[tuple[str, str, int]] = set()
    for line in text.splitlines():
        tokens = words(line)
        if line.startswith(COLUMN_LINE) and tokens:
            out.add((_sha16(" ".join(tokens)), _sha16(tokens[0]), len(tokens)))
    return frozenset(out)


def documented_spans(text: str, lines: frozenset[tuple[str, str, int]]) -> list[str]:
    """The word spans of ``text`` that are one of ``lines`` (a column's name and description, word for word:
    a completion's column line, or a repair statement's "`name` (description)")."""
    if not lines:
        return []
    tokens = words(text)
    lengths: dict[str, set[int]] = {}
    wanted = {line for line, _, _ in lines}
    for _, head, length in lines:
        lengths.setdefault(head, set()).add(length)
    found = []
    for i, token in enumerate(tokens):
        for length in lengths.get(_sha16(token), ()):
            span = " ".join(tokens[i : i + length])
            if _sha16(span) in wanted:
                found.append(span)
    return found


def words(text: str) -> list[str]:
    """Lower-case word tokens; punctuation and whitespace differences do not hide an overlap."""
    return [w.lower() for w in _WORD.findall(text)]


def ngrams(text: str, n: int = NGRAM) -> dict[str, str]:
    """hash -> the n-gram text, for every word n-gram of ``text``."""
    tokens = words(text)
    out: dict[str, str] = {}
    for i in range(len(tokens) - n + 1):
        gram = " ".join(tokens[i : i + n])
        out[hashlib.sha256(gram.encode()).hexdigest()[:16]] = gram
    return out


def specific_runs(text: str) -> list[list[str]]:
    """The word runs of ``text`` left after cutting out every occurrence of a template phrase. A line break
    ends a run too: a completion statement puts each documented column on a line of its own, and words of
    two columns' descriptions side by side are not a phrase of either (a repair statement is one line)."""
    from dbt_harvest.harvester.mint.statement import fixed_phrases

    by_first: dict[str, list[tuple[str, ...]]] = {}
    for phrase in fixed_phrases():  # longest first
        by_first.setdefault(phrase[0], []).append(phrase)
    runs: list[list[str]] = []
    for line in text.splitlines():
        tokens = words(line)
        runs.append([])
        i = 0
        while i < len(tokens):
            match = next((p for p in by_first.get(tokens[i], ()) if tuple(tokens[i : i + len(p)]) == p), None)
            if match is None:
                runs[-1].append(tokens[i])
                i += 1
            else:
                runs.append([])
                i += len(match)
    return [run for run in runs if run]


def specific_ngrams(text: str, n: int = NGRAM) -> dict[str, str]:
    """hash -> n-gram text, for every word n-gram inside one run of task-specific words of ``text``."""
    out: dict[str, str] = {}
    for run in specific_runs(text):
        for i in range(len(run) - n + 1):
            gram = " ".join(run[i : i + n])
            out[hashlib.sha256(gram.encode()).hexdigest()[:16]] = gram
    return out


def statement_sha(text: str) -> str:
    """sha256 of the statement's normalised words: equal for a copy whatever its length or spacing."""
    return hashlib.sha256(" ".join(words(text)).encode()).hexdigest()


def digest(record: TaskRecord) -> TaskDigest:
    return TaskDigest(
        instance_id=record.instance_id,
        pin=record.pin,
        split=record.split,
        split_group=record.split_group,
        file=record.file,
        ngrams=frozenset(specific_ngrams(record.problem_statement)),
        statement_sha=statement_sha(record.problem_statement),
        column_lines=column_lines(record.problem_statement) if record.kind == "completion" else frozenset(),
    )
