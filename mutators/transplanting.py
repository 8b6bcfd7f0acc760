"""Carry an edit of a raw Jinja model file over to dbt's compiled SQL of the same model.

Jinja copies the text between tags verbatim (only ``{%-``/``-%}`` eat neighbouring whitespace), so
the edited span and its literal surroundings reappear in the compiled text. The edit is located by a
pattern: the span itself (tags inside it match whatever they rendered to) between literal anchors,
widened tag by tag until exactly one place in the compiled text matches. No unique match → None, and
the caller falls back to compiling the mutant with dbt.
"""

from __future__ import annotations

import re

from dbt_harvest.mutators.edits import Edit
from dbt_harvest.mutators.jinja import JinjaScanError, Tag, scan_tags

_MAX_WIDEN = 4
_ANY = "(?:.*?)"


#: an edit spanning more Jinja tags than this is not placed: each becomes a wildcard of the search pattern, and
#: over a long compiled model the lazy and greedy searches backtrack for minutes (a fix mined from history that
#: rewrites whole CTEs spans 50; a planted mutation's site, one expression, a handful at most)
MAX_INNER_TAGS = 32


def transplant(edit: Edit, raw_text: str, compiled_text: str) -> Edit | None:
    """The same edit over ``compiled_text``, or None when its place is not unambiguous."""
    try:
        tags = scan_tags(raw_text)
    except JinjaScanError:
        return None
    if edit.end > len(raw_text) or any(_cuts(t, edit) for t in tags):
        return None
    inner = [t for t in tags if edit.start <= t.start and t.end <= edit.end]
    if len(inner) > MAX_INNER_TAGS:
        return None
    before = [t for t in tags if t.end <= edit.start]
    after = [t for t in tags if t.start >= edit.end]
    middle = _middle_pattern(raw_text, edit, inner)
    for k in range(_MAX_WIDEN + 1):
        left = _left_pattern(raw_text, edit.start, before, k)
        right = _right_pattern(raw_text, edit.end, after, k)
        source = left + "(?P<mid>" + middle + ")" + right
        pattern = re.compile(source, re.DOTALL)
        greedy = re.compile(source.replace(".*?)", ".*)"), re.DOTALL)
        first, places = _places(pattern, greedy, compiled_text)
        if first is None:
            return None
        if places == 1:
            return _mapped(first, edit, raw_text, inner)
        if k >= len(before) and k >= len(after):
            return None
    return None


def _cuts(tag: Tag, edit: Edit) -> bool:
    if edit.start == edit.end:
        return tag.start < edit.start < tag.end
    inside = edit.start <= tag.start and tag.end <= edit.end
    return not inside and edit.start < tag.end and tag.start < edit.end


def _literal(text: str) -> str:
    """A literal anchor: exact text, but any whitespace run may have been trimmed or kept."""
    parts = re.split(r"(\s+)", text)
    return "".join(r"\s*" if p.isspace() else re.escape(p) for p in parts if p)


def _middle_pattern(raw: str, edit: Edit, inner: list[Tag]) -> str:
    out, pos = [], edit.start
    for tag in inner:
        out.append(re.escape(raw[pos : tag.start]))
        out.append("(.*?)")
        pos = tag.end
    out.append(re.escape(raw[pos : edit.end]))
    return "".join(out)


def _left_pattern(raw: str, start: int, before: list[Tag], k: int) -> str:
    tags = before[-(k + 1) :] if before else []
    if not tags or len(before) <= k:
        # reaches the start of the file
        pieces, pos = [r"\A"], 0
        for tag in before:
            pieces += [_literal(raw[pos : tag.start]), _ANY]
            pos = tag.end
        return "".join(pieces) + _literal(raw[pos:start])
    pieces, pos = [], tags[0].end
    for tag in tags[1:]:
        pieces += [_literal(raw[pos : tag.start]), _ANY]
        pos = tag.end
    return "".join(pieces) + _literal(raw[pos:start])


def _right_pattern(raw: str, end: int, after: list[Tag], k: int) -> str:
    tags = after[: k + 1]
    if len(after) <= k:
        pieces, pos = [], end
        for tag in after:
            pieces += [_literal(raw[pos : tag.start]), _ANY]
            pos = tag.end
        return "".join(pieces) + _literal(raw[pos:]) + r"\s*\Z"
    pieces, pos = [], end
    for tag in tags[:-1]:
        pieces += [_literal(raw[pos : tag.start]), _ANY]
        pos = tag.end
    return "".join(pieces) + _literal(raw[pos : tags[-1].start])


def _places(lazy: re.Pattern[str], greedy: re.Pattern[str], text: str) -> tuple[re.Match[str] | None, int]:
    """The first match and how many distinct places (up to 2) the edited span could sit at.

    Each start offset is tried with lazy and greedy wildcards: when they put the span in different
    places, whatever a tag rendered to could hide the span, and the place is ambiguous.
    """
    first: re.Match[str] | None = None
    places: set[tuple[int, int]] = set()
    pos = 0
    while pos <= len(text) and len(places) < 2:
        match = lazy.search(text, pos)
        if match is None:
            break
        first = first or match
        places.add(match.span("mid"))
        wide = greedy.match(text, match.start())
        if wide is not None:
            places.add(wide.span("mid"))
        pos = match.start() + 1
    return first, len(places)


def _mapped(match: re.Match[str], edit: Edit, raw: str, inner: list[Tag]) -> Edit | None:
    replacement = edit.replacement
    if inner:
        mid_groups = list(range(1, (match.re.groups or 0) + 1))
        # the middle's tag groups are the last len(inner) groups inside "mid"
        rendered = tuple(match.group(g) for g in mid_groups[-len(inner) :])
        for tag, text in zip(inner, rendered):
            replacement = replacement.replace(raw[tag.start : tag.end], text)
    if "{{" in replacement or "{%" in replacement:
        return None
    return Edit(match.start("mid"), match.end("mid"), replacement)
