"""Mask the Jinja of a dbt model file with same-length placeholders so sqlglot can parse it in place.

Every ``{{ … }}`` becomes an identifier of the same length (the relation's name for ``ref``/``source``,
so readers and operators can tell relations apart), every ``{% … %}`` and ``{# … #}`` becomes
whitespace; block bodies are kept or blanked by a masking policy, tried in order until one parses.
Because the masked text has the file's length, a parser offset is a file offset: edits found on the
masked text splice straight into the original.

Off-limits regions (never edited): whole ``{% if %}``/``{% for %}``/``{% macro %}``… blocks, ``config()``
calls, other macro calls, bare statement tags and Jinja comments. An edit may also never cut through
any tag; it may contain a whole ``ref``/``source``/``var`` expression (that is how a conjunct holding
``{{ var('x') }}`` can be dropped).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.tokens import Token

from dbt_harvest.mutators.jinja import Block, JinjaScanError, Tag, match_blocks, scan_tags
from dbt_harvest.mutators.parsing import compute_spans, first_parse

#: expression tags whose rendering is a relation name.
RELATION_CALLS = frozenset({"ref", "source", "this"})
#: expression tags whose rendering is a single value or name; safe inside a larger edit.
VALUE_CALLS = frozenset({"var", "env_var", "target", "this", "ref", "source", "adapter", "run_started_at"})

_CALL_ARG = re.compile(r"""['"]([^'"]+)['"]\s*(?:,\s*(?:v\s*=\s*)?['"]?[^'")]*['"]?\s*)?\)\s*$""")
_IDENT = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class Region:
    """A half-open range [start, end) of the file that no mutation may touch, and why."""

    start: int
    end: int
    why: str

    def overlaps(self, start: int, end: int) -> bool:
        """True when an edit of [start, end) touches this region (an insertion touches its inside)."""
        if start == end:
            return self.start < start < self.end
        return start < self.end and self.start < end


@dataclass(frozen=True)
class MaskedFile:
    """A model file, its masked twin, whether sqlglot parsed it, and what may not be edited."""

    text: str
    masked: str
    parsed: bool
    reason: str | None
    off_limits: tuple[Region, ...]
    tags: tuple[Tag, ...] = ()
    dialect: str | None = None
    policy: str | None = None
    tree: exp.Expression | None = field(default=None, compare=False, repr=False)  # set when ``parsed``
    tokens: tuple[Token, ...] = field(default=(), compare=False, repr=False)
    spans: dict[int, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)

    def span(self, node: Any) -> tuple[int, int] | None:
        """(start, end exclusive) of a node of ``tree`` in the file, or None when unknown."""
        return self.spans.get(id(node))

    def editable(self, start: int, end: int) -> bool:
        """True when an edit of [start, end) avoids off-limits regions and cuts through no tag."""
        if any(r.overlaps(start, end) for r in self.off_limits):
            return False
        for tag in self.tags:
            inside = start <= tag.start and tag.end <= end and start < end
            if not inside and Region(tag.start, tag.end, "").overlaps(start, end):
                return False
        return True


#: how many one-line macro calls are tried, one at a time, as the file's WHERE clause
MAX_WHERE_TRIES = 8

#: masking policies, tried in order: how block bodies and macro calls are rendered for the parser.
POLICIES: tuple[tuple[str, str, str], ...] = (
    # (name, if-blocks, macro calls)
    ("first-branch", "first", "ident"),
    ("no-blocks", "none", "ident"),
    ("last-branch", "last", "ident"),
    ("first-branch/blank-macros", "first", "blank"),
    ("no-blocks/blank-macros", "none", "blank"),
    ("first-branch/where-macros", "first", "where"),  # macros that expand to a WHERE clause
    ("first-branch/select-macros", "first", "select"),  # a macro that renders the whole SELECT
)


def mask_file(text: str) -> MaskedFile:
    """Mask ``text`` under each policy until one parses; report the off-limits regions either way."""
    try:
        tags = scan_tags(text)
        blocks = match_blocks(tags)
    except JinjaScanError as exc:
        return MaskedFile(text, _blank_all(text), False, f"jinja: {exc}", (Region(0, len(text), "unreadable jinja"),))
    regions = _off_limits(tags, blocks)
    first_masked = ""
    first_reason = ""
    for name, branch, macros in POLICIES:
        masked = _without_bom(_mask(text, tags, blocks, branch, macros))
        if not masked.strip():
            return MaskedFile(text, masked, False, "no SQL outside Jinja", regions, tuple(tags))
        first_masked = first_masked or masked
        dialect, tree_or_error, tokens = first_parse(masked)
        if isinstance(tree_or_error, str):  # (None, the first error, None): no dialect parsed it
            first_reason = first_reason or tree_or_error
            continue
        tree = tree_or_error
        return MaskedFile(
            text,
            masked,
            True,
            None,
            regions,
            tuple(tags),
            dialect,
            name,
            tree=tree,
            tokens=tuple(tokens or ()),
            spans=compute_spans(tree, masked),
        )
    # a macro that expands to a WHERE clause among others that expand to expressions: try each macro
    # call that stands alone on its line, one at a time, as the WHERE (a file-wide rendering gives
    # several WHEREs; a call inside a select list shares its line with a comma or an alias)
    calls = [
        t
        for t in tags
        if _is_macro_call(t) and t.word != "config" and _alone_on_its_line(text, t) and t.end - t.start >= 8
    ][:MAX_WHERE_TRIES]
    for call in calls:
        masked = _without_bom(_mask(text, tags, blocks, "first", "ident", where_at=call.start))
        dialect, tree_or_error, tokens = first_parse(masked)
        if isinstance(tree_or_error, str):  # no dialect parsed it
            continue
        tree = tree_or_error
        return MaskedFile(
            text,
            masked,
            True,
            None,
            regions,
            tuple(tags),
            dialect,
            f"first-branch/where-macro@{call.start}",
            tree=tree,
            tokens=tuple(tokens or ()),
            spans=compute_spans(tree, masked),
        )
    return MaskedFile(text, first_masked, False, first_reason, regions, tuple(tags))


def _without_bom(masked: str) -> str:
    """A model file saved with a UTF-8 byte order mark (editors on Windows write one; dbt and DuckDB read the
    file anyway) would not parse: the mark is blanked like Jinja, one character for one, so every span still
    points into the original text and a mutant keeps the mark where it was."""
    return " " + masked[1:] if masked.startswith("\ufeff") else masked


def _alone_on_its_line(text: str, tag: Tag) -> bool:
    raw = text[tag.start : tag.end]
    line_start = text.rfind("\n", 0, tag.start) + 1
    line_end = text.find("\n", tag.end)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    return "\n" not in raw and line.strip() == raw


def _blank_all(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _blank(s: str) -> str:
    return "".join("\n" if ch == "\n" else " " for ch in s)


def _mask(text: str, tags: list[Tag], blocks: list[Block], branch: str, macros: str, where_at: int = -1) -> str:
    chars = list(text)
    blanked: list[tuple[int, int]] = []
    for block in blocks:
        bodies = block.bodies()
        if block.word in ("if",):
            keep = {"first": 0, "last": len(bodies) - 1, "none": -1}[branch]
            # an if without else keeps its body under "last" too
            for i, (a, b) in enumerate(bodies):
                if i != keep:
                    blanked.append((a, b))
        elif block.word == "for":
            if branch == "none":
                blanked.extend(bodies)
            else:
                blanked.extend(bodies[1:])  # a for's else branch
        elif block.word in ("snapshot", "with", "block", "filter"):
            continue
        else:  # macro, call, set, raw, docs, test, materialization: not model SQL
            blanked.append((block.opener.end, block.closer.start))
    for a, b in blanked:
        chars[a:b] = _blank(text[a:b])
    for tag in tags:
        if any(a <= tag.start < b for a, b in blanked):
            continue
        chars[tag.start : tag.end] = _placeholder(tag, text, "where" if tag.start == where_at else macros)
    return "".join(chars)


def _placeholder(tag: Tag, text: str, macros: str) -> str:
    raw = text[tag.start : tag.end]
    if tag.kind != "expr" or tag.word == "config":
        return _blank(raw)
    if _is_macro_call(tag) and "type_" in tag.body.split("(")[0] and "\n" not in raw:
        return "text" + " " * (len(raw) - 4)  # dbt.type_timestamp() and friends render a type name
    if macros == "blank" and _is_macro_call(tag):
        return _blank(raw)
    if macros == "where" and _is_macro_call(tag) and len(raw) >= 8 and "\n" not in raw:
        return "where m" + "_" * (len(raw) - 7)
    if macros == "select" and _is_macro_call(tag) and len(raw) >= 16 and "\n" not in raw:
        return "select * from m" + "_" * (len(raw) - 15)
    name = _relation_name(tag) if tag.word in RELATION_CALLS else ""
    stem = name or ("v" if tag.word in VALUE_CALLS or not _is_macro_call(tag) else "m")
    stem = _IDENT.sub("_", stem)
    if not stem or stem[0].isdigit():
        stem = "r" + stem
    stem = stem[: len(raw)]
    return stem + "_" * (len(raw) - len(stem)) if "\n" not in raw else _newline_safe(stem, raw)


def _newline_safe(stem: str, raw: str) -> str:
    """A multi-line tag: identifier on the first line, whitespace after (keeps line numbers)."""
    first = raw.index("\n")
    head = (stem + "_" * first)[:first] if first >= 1 else ""
    return head + _blank(raw[first:])


def _relation_name(tag: Tag) -> str:
    if tag.word == "this":
        return "this"
    match = _CALL_ARG.search(tag.body)
    if not match:
        args = re.findall(r"""['"]([^'"]+)['"]""", tag.body)
        return args[-1] if args else tag.word
    args = re.findall(r"""['"]([^'"]+)['"]""", tag.body)
    return args[-1] if args else match.group(1)


def _is_macro_call(tag: Tag) -> bool:
    """True for ``{{ something(…) }}`` that is not ref/source/var/config (a macro call)."""
    return "(" in tag.body and tag.word not in VALUE_CALLS and tag.word != "config"


def _off_limits(tags: list[Tag], blocks: list[Block]) -> tuple[Region, ...]:
    regions: list[Region] = []
    for block in blocks:
        regions.append(Region(block.start, block.end, f"inside {{% {block.word} %}} block"))
    for tag in tags:
        if tag.kind == "comment":
            regions.append(Region(tag.start, tag.end, "jinja comment"))
        elif tag.kind == "stmt":
            regions.append(Region(tag.start, tag.end, f"jinja statement {{% {tag.word} %}}"))
        elif tag.word == "config":
            regions.append(Region(tag.start, tag.end, "config() block"))
        elif _is_macro_call(tag):
            name = re.match(r"[\w.]+", tag.body)
            regions.append(Region(tag.start, tag.end, f"macro call {name.group(0) if name else tag.word}()"))
    regions.sort(key=lambda r: (r.start, r.end))
    return tuple(regions)
