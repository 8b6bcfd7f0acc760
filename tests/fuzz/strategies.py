"""Hypothesis strategies for bad input: valid documents with fields dropped, retyped or added, and junk.

Why it exists: every file the harvester reads (pin TOML, task record JSON, training config TOML) comes
from a disk a user or another tool can write. Starting from a valid document and breaking it one field
at a time reaches the validators' deep branches, which purely random text never does.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

#: any JSON value, a few levels deep
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)

#: any TOML value (no None, integers within 64 bits)
toml_values = st.recursive(
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


@st.composite
def broken_dict(
    draw: st.DrawFn, base: dict[str, Any], values: st.SearchStrategy[Any], depth: int = 2
) -> dict[str, Any]:
    """``base`` with some keys dropped, some values replaced (recursively into nested tables), some added."""
    out: dict[str, Any] = {}
    for key, value in base.items():
        action = draw(st.sampled_from(("keep", "keep", "keep", "drop", "replace", "recurse")))
        if action == "drop":
            continue
        if action == "replace":
            out[key] = draw(values)
        elif action == "recurse" and depth and isinstance(value, dict):
            out[key] = draw(broken_dict(value, values, depth - 1))
        elif action == "recurse" and depth and isinstance(value, list) and value and isinstance(value[0], dict):
            out[key] = [draw(broken_dict(item, values, depth - 1)) for item in value]
        else:
            out[key] = value
    for extra in draw(st.lists(st.text(min_size=1, max_size=8), max_size=2)):
        out[extra] = draw(values)
    return out


#: file contents that are not documents at all: random bytes, text, truncations are drawn by the tests
junk_bytes = st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode("utf-8"))
