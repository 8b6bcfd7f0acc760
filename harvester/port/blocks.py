"""Porting SQL that holds Jinja ``{% if %}`` blocks, proved by rendering both ways.

The most common shape real projects need ported across a block is the incremental filter:
``... where true {% if is_incremental() %} and updated_at > (select max(updated_at) from {{ this }})
{% endif %}``. The SQL between blocks is no statement sqlglot can read alone, so the statement is ported
whole, the block tags standing in it as marker comments, and the tags are put back where the markers come
out. sqlglot reformats the statement and may attach a comment one word off (after an ``AND`` instead of
before it), so the result is accepted only when it is proved: for the block rendered in and rendered out,
the ported text (markers removed, or the block's content removed) must read in DuckDB exactly as the
original reads in its dialect (both written canonically by sqlglot, comments left out). When the markers'
own places do not prove it, nearby word boundaries are tried (at most two words either way); when none
does, the model is refused. sqlglot moves a comment that stands last in a parenthesis (an ``{% endif %}``
before a CTE's closing ``)`` goes to the CTE's name) and drops one after some expressions (a BigQuery
interval): one marker dropped, or found before the marker before it, is looked for at the word boundaries
after that marker (at most ``MAX_LOST_PLACES``), under the same proof.

Only ``{% if %} ... {% endif %}`` pairs, not nested and without ``{% else %}``, are handled; anything else
is refused. Pure: text in, text out.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence

from sqlglot.errors import ErrorLevel

from dbt_harvest.harvester.port.fixes import canonical, transpile

_MARKER = "/* __harvest_block_{}__ */"
_MARKER_RE = re.compile(r"\s?/\* __harvest_block_(\d+)__ \*/")
#: how many words a marker may move either way while the port is proved
MAX_SHIFT = 2
#: blocks whose marker places are searched (more are tried in place only)
MAX_SEARCHED_BLOCKS = 2
#: word boundaries tried for the one marker sqlglot dropped (the first ones after the marker before it)
MAX_LOST_PLACES = 40


class BlockPortError(Exception):
    """The blocks cannot be ported with proof; the caller refuses the model (the message says why)."""


def _pairs(blocks: Sequence[str]) -> None:
    """BlockPortError unless the block tags are ``if``/``endif`` pairs, not nested, without ``else``."""
    if len(blocks) % 2:
        raise BlockPortError("unbalanced Jinja blocks")
    for opening, closing in zip(blocks[::2], blocks[1::2], strict=True):
        if not re.match(r"\{%-?\s*if\b", opening) or not re.match(r"\{%-?\s*endif\b", closing):
            raise BlockPortError("a Jinja block other than one {% if %} ... {% endif %}")


def _renderings(pieces: Sequence[str]) -> tuple[str, str]:
    """(every block rendered in, every block rendered out) from SQL pieces around the block tags."""
    inside = "".join(pieces)
    outside = "".join(piece for i, piece in enumerate(pieces) if i % 2 == 0)
    return inside, outside


def _insert(base: str, offsets: Sequence[int]) -> str:
    out, last = [], 0
    for i, offset in enumerate(offsets):
        out += [base[last:offset], " " + _MARKER.format(i) + " "]
        last = offset
    return "".join(out) + base[last:]


def _boundaries(base: str, offset: int) -> list[int]:
    """Word boundaries of ``base`` within ``MAX_SHIFT`` words of ``offset`` (``offset`` first)."""
    edges = sorted({0, len(base), *(m.start() for m in re.finditer(r"\s+", base))})
    nearest = min(range(len(edges)), key=lambda i: abs(edges[i] - offset))
    near = edges[max(0, nearest - MAX_SHIFT) : nearest + MAX_SHIFT + 1]
    return [offset, *sorted((e for e in near if e != offset), key=lambda e: abs(e - offset))]


def port_blocks(sql: str, blocks: Sequence[tuple[int, int]], dialect: str, model: str) -> str:
    """``sql`` (its ``{{ }}`` masked) ported from ``dialect`` with its block tags (spans ``blocks``) kept."""
    tags = [sql[a:b] for a, b in blocks]
    _pairs(tags)
    pieces, last = [], 0
    for a, b in blocks:
        pieces.append(sql[last:a])
        last = b
    pieces.append(sql[last:])
    inside, outside = _renderings(pieces)
    want_in, want_out = canonical(inside, dialect), canonical(outside, dialect)
    if want_in is None or want_out is None:
        raise BlockPortError(f"sqlglot cannot read it as {dialect} with its blocks rendered in and out")
    marked = "".join(p + (_MARKER.format(i) if i < len(tags) else "") for i, p in enumerate(pieces))
    ported = transpile(marked, dialect, pretty=True, unsupported_level=ErrorLevel.RAISE)
    if len(ported) != 1:
        raise BlockPortError(f"{len(ported)} statements where a model holds one")
    base = _MARKER_RE.sub("", ported[0])
    places: dict[int, int] = {}
    removed = 0
    for m in _MARKER_RE.finditer(ported[0]):
        places.setdefault(int(m.group(1)), m.start() - removed)
        removed += len(m.group(0))
    offsets: dict[int, int] = {}  # the markers in order; one dropped or moved before the one before it is lost
    for i in range(len(tags)):
        if i in places and places[i] >= max(offsets.values(), default=0):
            offsets[i] = places[i]
    if len(places) != len(_MARKER_RE.findall(ported[0])) or len(tags) - len(offsets) > 1:
        raise BlockPortError("the port lost or moved a Jinja block")
    searched = len(tags) <= 2 * MAX_SEARCHED_BLOCKS
    choices: list[Sequence[int]] = []
    for i in range(len(tags)):
        if i in offsets:
            choices.append(_boundaries(base, offsets[i]) if searched else [offsets[i]])
        else:  # the marker sqlglot dropped: the first word boundaries after the marker before it
            choices.append(_lost_places(base, offsets.get(i - 1, 0)))
    for chosen in itertools.product(*choices):
        if list(chosen) != sorted(chosen):
            continue
        candidate = _insert(base, chosen)
        if _proved(candidate, want_in, want_out):
            return _MARKER_RE.sub(_tag_back(tags), candidate)
    raise BlockPortError("no place for its Jinja blocks in the ported SQL reads as the original, in and out")


def _lost_places(base: str, after: int) -> list[int]:
    """The first ``MAX_LOST_PLACES`` word boundaries of ``base`` at or after ``after`` (its end included)."""
    edges = sorted({len(base), *(m.start() for m in re.finditer(r"\s+", base))})
    return [e for e in edges if e >= after][:MAX_LOST_PLACES]


def _proved(candidate: str, want_in: str, want_out: str) -> bool:
    parts = re.split(r"/\* __harvest_block_\d+__ \*/", candidate)
    got_in, got_out = _renderings(parts)
    return canonical(got_in, "duckdb") == want_in and canonical(got_out, "duckdb") == want_out


def _tag_back(tags: Sequence[str]) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return " " + tags[int(match.group(1))]

    return replace


__all__ = ["BlockPortError", "port_blocks"]
