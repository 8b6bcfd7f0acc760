"""License detection: the SPDX id of a repository's license file, else "unknown".

Only permissive or well-known licenses are recognised by their distinctive phrases; anything else is
"unknown", which a public dataset build treats as not redistributable.
"""

from __future__ import annotations

import re
from pathlib import Path

_FILES = (
    "LICENSE",
    "LICENSE.md",
    "LICENSE.txt",
    "LICENCE",
    "LICENCE.md",
    "COPYING",
    "COPYING.md",
    "license",
    "license.md",
)

# (spdx id, phrases that must all appear, case-insensitive, whitespace-normalised); first match wins.
_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Apache-2.0", ("apache license", "version 2.0")),
    ("MIT", ("permission is hereby granted, free of charge",)),
    ("BSD-3-Clause", ("redistribution and use in source and binary forms", "neither the name")),
    ("BSD-2-Clause", ("redistribution and use in source and binary forms",)),
    ("AGPL-3.0", ("gnu affero general public license", "version 3")),
    ("LGPL-3.0", ("gnu lesser general public license", "version 3")),
    ("GPL-3.0", ("gnu general public license", "version 3")),
    ("GPL-2.0", ("gnu general public license", "version 2")),
    ("MPL-2.0", ("mozilla public license", "2.0")),
    ("Unlicense", ("this is free and unencumbered software released into the public domain",)),
    ("CC0-1.0", ("cc0 1.0 universal",)),
    ("ISC", ("permission to use, copy, modify, and/or distribute this software for any purpose",)),
)

#: licenses under which a harvested project's files may appear in a public dataset
REDISTRIBUTABLE = frozenset(
    {
        "Apache-2.0",
        "MIT",
        "BSD-3-Clause",
        "BSD-2-Clause",
        "MPL-2.0",
        "Unlicense",
        "CC0-1.0",
        "ISC",
        "GPL-3.0",
        "GPL-2.0",
        "LGPL-3.0",
        "AGPL-3.0",
    }
)


def spdx_of_text(text: str) -> str:
    norm = re.sub(r"\s+", " ", text.lower())
    for spdx, phrases in _RULES:
        if all(p in norm for p in phrases):
            return spdx
    return "unknown"


def detect_license(tree: Path) -> str:
    """SPDX id of the first license file at the root of ``tree``; "unknown" when none is recognised."""
    for name in _FILES:
        path = tree / name
        if path.is_file() and not path.is_symlink():
            return spdx_of_text(path.read_text(encoding="utf-8", errors="replace")[:20000])
    return "unknown"
