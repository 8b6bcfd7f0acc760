"""Workspaces of a pin: the tree at its commit with its packages vendored, ready to build.

A template per pin is materialized once (export without .git, vendor the packages recorded in the
pin at their exact commits, apply the pin's compat patch) and every build, mint confirmation and
agent episode gets a fresh copy of it. The template appears atomically and carries a marker naming
the pin's tree and package commits, so a half-made or stale template is never reused.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from dbt_harvest.core import atomic, home
from dbt_harvest.core.errors import PinError
from dbt_harvest.core.home import mirrors_dir, pins_dir
from dbt_harvest.core.patching import apply_patch
from dbt_harvest.core.pin import Pin
from dbt_harvest.harvester.gitstore import GitStore
from dbt_harvest.harvester.history.fix import apply_fix, pin_fix
from dbt_harvest.harvester.packages import vendor_packages

TEMPLATE_MARKER = ".harvest-template.json"


def _marker(pin: Pin) -> str:
    return json.dumps(
        {
            "commit": pin.commit,
            "tree": pin.tree,
            "compat": pin.compat_patch_sha256,
            "augmentation": pin.augmentation_sha256,
            **({"synthesis": pin.synthesis_sha256} if pin.synthesis_sha256 else {}),
            **({"port": pin.port_sha256} if pin.port_sha256 else {}),
            **({"fix": pin.fix_sha256} if pin.is_history else {}),
            "packages": [[p.name, p.commit, p.source] for p in pin.packages],
        },
        sort_keys=True,
    )


#: where augmentation patches live under the pins folder: derived data (rows cloned from a repository's
#: seeds), re-derived by `harvest mint --augment` and never committed (.gitignore), unlike compat patches
AUGMENTATIONS = "patches/augmentations"


def augmentation_path(sha256: str, pins: Path | None = None) -> Path:
    return (pins or pins_dir()) / AUGMENTATIONS / f"{sha256}.diff"


#: where synthesized data lives under the pins folder: derived from the project (harvester/synth), made
#: again by `harvest add --rebuild` and checked by digest, never committed (.gitignore)
SYNTHESIZED = "patches/synthesized"


def synthesis_path(sha256: str, pins: Path | None = None) -> Path:
    return (pins or pins_dir()) / SYNTHESIZED / f"{sha256}.diff"


#: where dialect ports live under the pins folder: the repository's model SQL rewritten (harvester/port),
#: derived again by `harvest add --rebuild` and checked by digest, never committed (.gitignore)
PORTED = "patches/ported"


def port_path(sha256: str, pins: Path | None = None) -> Path:
    return (pins or pins_dir()) / PORTED / f"{sha256}.diff"


def port_patch_text(pin: Pin, pins: Path | None = None) -> str:
    """The pin's dialect port patch from ``pins``/patches/ported, verified against its hash."""
    return _stored_patch(
        pin,
        pin.port_sha256,
        "dialect port patch",
        pins,
        PORTED,
        missing=f" (derive it again: `harvest add {pin.spec} --rebuild`)",
    )


def _stored_patch(
    pin: Pin, sha256: str, what: str, pins: Path | None, folder: str = "patches", missing: str = ""
) -> str:
    """A patch the pin records by hash, from ``pins``/``folder`` (default: the pins folder), verified."""
    if not sha256:
        return ""
    path = (pins or pins_dir()) / folder / f"{sha256}.diff"
    if not path.is_file():
        raise PinError(f"{pin.id}: {what} {path} is missing{missing}")
    text = path.read_bytes().decode("utf-8")  # exactly as written: a CRLF file's lines keep their \r
    if hashlib.sha256(text.encode()).hexdigest() != sha256:
        raise PinError(f"{pin.id}: {what} {path.name} does not match its recorded hash")
    return text


def compat_patch_text(pin: Pin, pins: Path | None = None) -> str:
    """The pin's compat patch from ``pins``/patches (default: the pins folder), verified against the hash the pin records."""
    return _stored_patch(pin, pin.compat_patch_sha256, "compat patch", pins)


def augmentation_text(pin: Pin, pins: Path | None = None) -> str:
    """The pin's seed augmentation patch (distinguishing data) from ``pins``/patches/augmentations,
    verified against its hash."""
    return _stored_patch(
        pin,
        pin.augmentation_sha256,
        "augmentation patch",
        pins,
        AUGMENTATIONS,
        missing=f" (derive it again: `harvest mint {pin.augments} --augment`)",
    )


def synthesis_text(pin: Pin, pins: Path | None = None) -> str:
    """The pin's synthesized data patch from ``pins``/patches/synthesized, verified against its hash."""
    return _stored_patch(
        pin,
        pin.synthesis_sha256,
        "synthesized data patch",
        pins,
        SYNTHESIZED,
        missing=f" (derive it again: `harvest add {pin.spec} --rebuild --synthesize-data`)",
    )


def populate(
    pin: Pin,
    tree: Path,
    compat_text: str,
    *,
    fetch_from: str | None = None,
    augment_text: str | None = None,
    synth_text: str | None = None,
    port_text: str | None = None,
) -> None:
    """Write the pin's tree at ``tree`` (must not exist): export the commit (checked against the pin's
    tree id), vendor its packages at their commits, apply ``compat_text`` (checked against its sha256),
    then the pin's dialect port (``port_text``, default: read from the pins folder; checked), then the pin's
    synthesized data (``synth_text``, default: read from the pins folder; checked), then the pin's
    seed augmentation (``augment_text``, default: read from the pins folder; checked too), then a
    history pin's fix (its fix commit's model files, read from the repository and checked against the pin).
    ``fetch_from`` is where the repository's bytes come from when that is not ``pin.url`` (a mirror)."""
    if pin.compat_patch_sha256 and hashlib.sha256(compat_text.encode()).hexdigest() != pin.compat_patch_sha256:
        raise PinError(f"{pin.id}: the compat patch does not match its recorded sha256 {pin.compat_patch_sha256[:12]}")
    store = GitStore(mirrors_dir())
    repo = store.mirror(pin.url, fetch_from=fetch_from)
    report = store.export(repo, pin.commit, tree)
    if report.tree != pin.tree:
        raise PinError(f"{pin.id}: the commit's tree is {report.tree[:12]}, the pin recorded {pin.tree[:12]}")
    vendor_packages(tree / pin.project_dir, pin.packages, store, workspace=tree)
    if pin.compat_patch_sha256:
        apply_patch(tree, compat_text)
    _apply_recorded(tree, pin, pin.port_sha256, port_text, port_patch_text, "dialect port patch")
    _apply_recorded(tree, pin, pin.synthesis_sha256, synth_text, synthesis_text, "synthesized data patch")
    _apply_recorded(tree, pin, pin.augmentation_sha256, augment_text, augmentation_text, "augmentation patch")
    if pin.is_history:  # the fix, read again from the repository's history (a pin never stores code)
        apply_fix(tree, pin_fix(pin, repo))


def _apply_recorded(
    tree: Path, pin: Pin, sha256: str, given: str | None, stored: Callable[[Pin], str], what: str
) -> None:
    """Apply the patch the pin records by ``sha256`` (none when empty): ``given`` (a dataset row's text) or
    else read by ``stored``, checked against the hash first."""
    if not sha256:
        return
    text = stored(pin) if given is None else given
    if hashlib.sha256(text.encode()).hexdigest() != sha256:
        raise PinError(f"{pin.id}: the {what} does not match its recorded sha256 {sha256[:12]}")
    apply_patch(tree, text)


def template(
    pin: Pin,
    *,
    compat_text: str | None = None,
    fetch_from: str | None = None,
    augment_text: str | None = None,
    synth_text: str | None = None,
    port_text: str | None = None,
) -> Path:
    """The pin's materialized tree (cached under HARVEST_HOME/templates), made on first use.

    ``compat_text`` defaults to the pin's compat patch under the pins folder (a dataset row carries its own)."""
    dest = home.template_dir(pin.id)
    marker = dest / TEMPLATE_MARKER
    if marker.is_file() and marker.read_text() == _marker(pin):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        tree = staging / "tree"
        populate(
            pin,
            tree,
            compat_patch_text(pin) if compat_text is None else compat_text,
            fetch_from=fetch_from,
            augment_text=augment_text,
            synth_text=synth_text,
            port_text=port_text,
        )
        atomic.write_text(tree / TEMPLATE_MARKER, _marker(pin))
        old = None
        if dest.exists():
            old = dest.with_name(dest.name + ".old")
            shutil.rmtree(old, ignore_errors=True)
            dest.rename(old)
        tree.rename(dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def fresh_workspace(
    pin: Pin,
    dest: Path,
    *,
    compat_text: str | None = None,
    fetch_from: str | None = None,
    augment_text: str | None = None,
    synth_text: str | None = None,
    port_text: str | None = None,
) -> Path:
    """A new copy of the pin's template at ``dest`` (which must not exist)."""
    shutil.copytree(
        template(
            pin,
            compat_text=compat_text,
            fetch_from=fetch_from,
            augment_text=augment_text,
            synth_text=synth_text,
            port_text=port_text,
        ),
        dest,
        symlinks=True,
        ignore=shutil.ignore_patterns(TEMPLATE_MARKER),
    )
    return dest
