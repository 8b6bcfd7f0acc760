"""Task digests: what the contamination lint needs to know about a task, without its content.

A sealed test task may not be read outside the audit's unseal path, yet the lint must compare test
problem statements with training ones. A digest carries the pin, split, group, mutated file and the
*hashed* word 13-grams of the problem statement, so the comparison needs no plaintext from the sealed side.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from core.task_record import TaskRecord

NGRAM = 13
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class TaskDigest:
    instance_id: str
    pin: str
    split: str
    split_group: str
    file: str
    ngrams: frozenset[str]  # sha256[:16] of each normalised 13-gram


def words(text: str) -> list[str]:
    """Lower-case word tokens; punctuation and whitespace differences do not hide an overlap."""
    return [w.lower() for w in _WORD.findall(text)]


def ngrams(text: str, n: int = NGRAM) -> dict[str, str]:
    """hash -> the n-gram text, for every word n-gram of ``text``."""
    tokens = words(text)
    out: dict[str, str] = {}
    for i in range(len(tokens) - n + 1):
        gram = " ".join(tokens[i:i + n])
        out[hashlib.sha256(gram.encode()).hexdigest()[:16]] = gram
    return out


def digest(record: TaskRecord) -> TaskDigest:
    return TaskDigest(
        instance_id=record.instance_id,
        pin=record.pin,
        split=record.split,
        split_group=record.split_group,
        file=record.file,
        ngrams=frozenset(ngrams(record.problem_statement)),
    )
