"""Find the Jinja tags of a dbt model file and the blocks they open and close.

Masking, off-limits regions and transplanting all need the same facts about a template: where each
``{{ … }}``, ``{% … %}`` and ``{# … #}`` starts and ends, what kind of tag it is, and which statement
tags pair into blocks (``if``/``for``/``macro``/…). This module finds them by scanning the text once;
it never renders anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: statement keywords that open a block, mapped to the keyword that closes it.
BLOCK_OPENERS: dict[str, str] = {
    "if": "endif",
    "for": "endfor",
    "macro": "endmacro",
    "call": "endcall",
    "filter": "endfilter",
    "set": "endset",  # only the block form ``{% set x %}…{% endset %}``
    "raw": "endraw",
    "docs": "enddocs",
    "test": "endtest",
    "snapshot": "endsnapshot",
    "materialization": "endmaterialization",
    "with": "endwith",
    "block": "endblock",
}
#: statement keywords that split a block into branches.
BRANCH_WORDS = frozenset({"elif", "else"})

_OPENERS = {"{{": "}}", "{%": "%}", "{#": "#}"}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Tag:
    """One Jinja tag: ``kind`` is ``expr`` ({{ }}), ``stmt`` ({% %}) or ``comment`` ({# #})."""

    start: int
    end: int
    kind: str
    body: str  # the text between the delimiters, whitespace-control markers removed, stripped

    @property
    def word(self) -> str:
        """The first word of the body (``if``, ``endfor``, ``ref``, ``config``…), or ''."""
        match = _WORD.match(self.body)
        return match.group(0) if match else ""

    @property
    def strips_left(self) -> bool:
        """True when the tag opens with ``{%-``/``{{-``: Jinja strips whitespace before it."""
        return self._raw_open.endswith("-")

    @property
    def strips_right(self) -> bool:
        """True when the tag closes with ``-%}``/``-}}``: Jinja strips whitespace after it."""
        return self._raw_close.startswith("-")

    # the raw delimiters are kept private; they are derived from the stored body and bounds
    _raw_open: str = ""
    _raw_close: str = ""


@dataclass(frozen=True)
class Block:
    """A statement block: its opening and closing tags and the tags that split it into branches."""

    opener: Tag
    closer: Tag
    branches: tuple[Tag, ...]  # elif/else tags, in order

    @property
    def start(self) -> int:
        return self.opener.start

    @property
    def end(self) -> int:
        return self.closer.end

    @property
    def word(self) -> str:
        return self.opener.word

    def bodies(self) -> list[tuple[int, int]]:
        """The text ranges of each branch body, first branch first."""
        cuts = [self.opener, *self.branches, self.closer]
        return [(a.end, b.start) for a, b in zip(cuts, cuts[1:])]


class JinjaScanError(ValueError):
    """The template's tags could not be matched (an unclosed tag or block)."""


def scan_tags(text: str) -> list[Tag]:
    """Every Jinja tag in ``text``, in order; ``{% raw %}`` bodies are left as text."""
    tags: list[Tag] = []
    pos = 0
    in_raw = False
    while True:
        start = _next_open(text, pos)
        if start < 0:
            break
        opener = text[start : start + 2]
        end = _close_of(text, start + 2, _OPENERS[opener])
        if end < 0:
            raise JinjaScanError(f"unclosed Jinja tag {opener!r} at offset {start}")
        inner = text[start + 2 : end - 2]
        left = inner[:1] if inner[:1] in "-+" else ""
        right = inner[-1:] if inner[-1:] in "-+" else ""
        body = inner[len(left) : len(inner) - len(right)].strip()
        kind = {"{{": "expr", "{%": "stmt", "{#": "comment"}[opener]
        tag = Tag(start, end, kind, body, _raw_open=opener + left, _raw_close=right + _OPENERS[opener])
        if in_raw and not (kind == "stmt" and tag.word == "endraw"):
            pos = start + 2
            continue
        if kind == "stmt" and tag.word == "raw":
            in_raw = True
        elif kind == "stmt" and tag.word == "endraw":
            in_raw = False
        tags.append(tag)
        pos = end
    return tags


def _next_open(text: str, pos: int) -> int:
    found = [i for i in (text.find(o, pos) for o in _OPENERS) if i >= 0]
    return min(found) if found else -1


def _close_of(text: str, pos: int, closer: str) -> int:
    """Offset just past ``closer``, skipping quoted strings inside expression and statement tags."""
    quote = ""
    i = pos
    n = len(text)
    while i < n:
        ch = text[i]
        if closer == "#}":
            j = text.find("#}", i)
            return -1 if j < 0 else j + 2
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif text.startswith(closer, i):
            return i + 2
        i += 1
    return -1


def is_block_opener(tag: Tag) -> bool:
    """True for a statement tag that opens a block (``set`` only in its block form)."""
    if tag.kind != "stmt" or tag.word not in BLOCK_OPENERS:
        return False
    if tag.word == "set":
        return "=" not in tag.body
    return True


def match_blocks(tags: list[Tag]) -> list[Block]:
    """Pair block openers with their closers; outermost blocks come before the blocks they contain."""
    blocks: list[Block] = []
    stack: list[tuple[Tag, list[Tag]]] = []
    for tag in tags:
        if tag.kind != "stmt":
            continue
        word = tag.word
        if is_block_opener(tag):
            stack.append((tag, []))
        elif word in BRANCH_WORDS:
            if stack:
                stack[-1][1].append(tag)
        elif word.startswith("end") and word[3:] in BLOCK_OPENERS:
            if not stack or BLOCK_OPENERS[stack[-1][0].word] != word:
                raise JinjaScanError(f"unmatched {{% {word} %}} at offset {tag.start}")
            opener, branches = stack.pop()
            blocks.append(Block(opener, tag, tuple(branches)))
    if stack:
        opener = stack[-1][0]
        raise JinjaScanError(f"unclosed {{% {opener.word} %}} block at offset {opener.start}")
    return sorted(blocks, key=lambda b: (b.start, -b.end))
