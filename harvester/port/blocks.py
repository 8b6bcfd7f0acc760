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

Only ``{% if %} ... {% endif %}`` and ``{% for %} ... {% endfor %}`` pairs, not nested and without
``{% else %}``, are handled; anything else is refused. A loop is proved for zero, one and two iterations
(zero and one are not enough: sqlglot reads a select list's trailing comma, so a comma moved out of the loop
passed them and broke at two). Pure: text in, text out.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from sqlglot.errors import ErrorLevel

from dbt_harvest.harvester.port.fixes import canonical, transpile

_MARKER = "/* __harvest_block_{}__ */"
_MARKER_RE = re.compile(r"\s?/\* __harvest_block_(\d+)__ \*/")
#: how many words a marker may move either way while the port is proved
MAX_SHIFT = 2
#: blocks whose marker places are searched together (more are placed one pair at a time, then proved together)
MAX_SEARCHED_BLOCKS = 2
#: combinations of pairwise-proved places tried together
MAX_PAIRWISE_TRIES = 200
#: where a marker may stand: before white space, or before a comma (a loop's body that starts with the comma
#: of a select list, which sqlglot writes at the end of the line before)
_EDGE = re.compile(r"\s+|,")
#: word boundaries tried for the one marker sqlglot dropped (the first ones after the marker before it)
MAX_LOST_PLACES = 40


class BlockPortError(Exception):
    """The blocks cannot be ported with proof; the caller refuses the model (the message says why)."""


def _pairs(blocks: Sequence[str]) -> None:
    """BlockPortError unless the block tags are ``if``/``endif`` or ``for``/``endfor`` pairs, not nested,
    without ``else``."""
    if len(blocks) % 2:
        raise BlockPortError("unbalanced Jinja blocks")
    for opening, closing in zip(blocks[::2], blocks[1::2], strict=True):
        kind = re.match(r"\{%-?\s*(if|for)\b", opening)
        if not kind or not re.match(rf"\{{%-?\s*end{kind[1]}\b", closing):
            raise BlockPortError("a Jinja block other than one {% if %} ... {% endif %} or {% for %} ... {% endfor %}")
        if re.search(r"\{%-?\s*else\b", opening + closing):
            raise BlockPortError("a Jinja block with an else")


def _renderings(pieces: Sequence[str], loops: Sequence[bool]) -> tuple[str, str, str]:
    """(every block rendered in, every block rendered out, every loop rendered twice and every ``if`` in) from
    SQL pieces around the block tags; ``loops`` says which pairs are ``for`` loops."""
    inside = "".join(pieces)
    outside = "".join(piece for i, piece in enumerate(pieces) if i % 2 == 0)
    twice = "".join(piece * (2 if i % 2 and loops[i // 2] else 1) for i, piece in enumerate(pieces))
    return inside, outside, twice


def _insert(base: str, offsets: Sequence[int]) -> str:
    out, last = [], 0
    for i, offset in enumerate(offsets):
        out += [base[last:offset], " " + _MARKER.format(i) + " "]
        last = offset
    return "".join(out) + base[last:]


def _boundaries(base: str, offset: int) -> list[int]:
    """Word boundaries of ``base`` within ``MAX_SHIFT`` words of ``offset`` (``offset`` first)."""
    edges = sorted({0, len(base), *(m.start() for m in re.finditer(_EDGE, base))})
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
    loops = [bool(re.match(r"\{%-?\s*for\b", opening)) for opening in tags[::2]]
    want = tuple(canonical(rendered, dialect) for rendered in _renderings(pieces, loops))
    if None in want:
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
    choices: list[Sequence[int]] = []
    for i in range(len(tags)):
        if i in offsets:
            choices.append(_boundaries(base, offsets[i]))
        else:  # the marker sqlglot dropped: the first word boundaries after the marker before it
            choices.append(_lost_places(base, offsets.get(i - 1, 0)))
    combos: Iterable[Sequence[int]] = itertools.product(*choices)
    if len(tags) > 2 * MAX_SEARCHED_BLOCKS:  # too many for every combination: each pair's places found alone
        combos = _pairwise(base, choices, pieces, loops, dialect)
    for chosen in combos:
        if list(chosen) != sorted(chosen):
            continue
        candidate = _insert(base, chosen)
        if _proved(candidate, want, loops):
            return _MARKER_RE.sub(_tag_back(tags), candidate)
    raise BlockPortError("no place for its Jinja blocks in the ported SQL reads as the original, in and out")


def _pairwise(
    base: str, choices: Sequence[Sequence[int]], pieces: Sequence[str], loops: Sequence[bool], dialect: str
) -> Iterator[tuple[int, ...]]:
    """The places of every marker, in order, made of places that prove each pair alone (every other block
    rendered in, its tags left out). The caller proves each together."""
    options: list[list[tuple[int, int]]] = []
    for k, loop in enumerate(loops):
        before, after = "".join(pieces[: 2 * k + 1]), "".join(pieces[2 * k + 2 :])
        want = [canonical(rendered, dialect) for rendered in _renderings([before, pieces[2 * k + 1], after], [loop])]
        found = [
            (a, b)
            for a in choices[2 * k]
            for b in choices[2 * k + 1]
            if a <= b and _proved(_insert(base, (a, b)), want, [loop])
        ]
        if not found:
            return
        options.append(found)

    def extend(done: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
        if len(done) == 2 * len(options):
            yield done
            return
        for a, b in options[len(done) // 2]:
            if not done or a >= done[-1]:
                yield from extend((*done, a, b))

    yield from itertools.islice(extend(()), MAX_PAIRWISE_TRIES)


def _lost_places(base: str, after: int) -> list[int]:
    """The first ``MAX_LOST_PLACES`` word boundaries of ``base`` at or after ``after`` (its end included)."""
    edges = sorted({len(base), *(m.start() for m in re.finditer(_EDGE, base))})
    return [e for e in edges if e >= after][:MAX_LOST_PLACES]


def _proved(candidate: str, want: Sequence[str | None], loops: Sequence[bool]) -> bool:
    parts = re.split(r"/\* __harvest_block_\d+__ \*/", candidate)
    return all(canonical(got, "duckdb") == wanted for got, wanted in zip(_renderings(parts, loops), want, strict=True))


def _tag_back(tags: Sequence[str]) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return " " + tags[int(match.group(1))]

    return replace


__all__ = ["BlockPortError", "port_blocks"]
