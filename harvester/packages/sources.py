"""Where a dbt package's git repository lives: the package mirror, else the network.

Why it exists: `dbt deps` needs the network (the hub index, then git hosts). The harvester must also work
offline, from a package mirror: a folder of git repositories at ``DIR/<org>/<package_name>`` named by
hub id, plus an optional ``DIR/mirror.toml`` mapping a hub id or git URL to another path (or URL). This
module turns a hub id or a git URL into a location GitStore can clone, trying the mirror first and the
network only when it is reachable; offline it fails fast with one line that says what to pass.
"""

from __future__ import annotations

import functools
import json
import os
import re
import socket
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from dbt_harvest.core.errors import PackageError

HUB_HOST = "hub.getdbt.com"
HUB_API = f"https://{HUB_HOST}/api/v1"
MIRROR_ENV = "HARVEST_PACKAGE_MIRROR"
MIRROR_MAP_FILE = "mirror.toml"
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_CODELOAD = re.compile(r"^https://codeload\.github\.com/([^/]+)/([^/]+)/")


@dataclass(frozen=True)
class PackageMirror:
    """A local package mirror: ``root`` and its map of hub id / git URL -> repository location."""

    root: Path
    mapping: dict[str, str] = field(default_factory=dict)

    def hub_location(self, hub_id: str) -> str | None:
        """The repository of hub package ``org/name``: mapped, else ``root/org/name``, else None."""
        mapped = self.mapping.get(hub_id) or self.mapping.get(hub_id.lower())
        if mapped:
            return mapped
        parts = hub_id.split("/")
        if len(parts) == 2 and all(p and p not in (".", "..") for p in parts):
            candidate = self.root / parts[0] / parts[1]
            if candidate.is_dir():
                return str(candidate)
        return None

    def git_location(self, url: str) -> str | None:
        """The repository standing in for git URL ``url``: mapped, else ``root/<owner>/<repo>``."""
        bare = url.rstrip("/")
        stem = bare[:-4] if bare.endswith(".git") else bare
        for key in (url, bare, stem, stem + ".git"):
            if key in self.mapping:
                return self.mapping[key]
        parts = [p for p in re.split(r"[/:]", stem) if p][-2:]
        remote = bool(_URL_SCHEME.match(url) or re.match(r"^[^/@]+@[^/:]+:", url))
        if remote and len(parts) == 2 and all(p not in (".", "..") for p in parts):
            candidate = self.root / parts[0] / parts[1]
            if candidate.is_dir():
                return str(candidate)
        return None


def load_mirror(path: Path | None) -> PackageMirror | None:
    """The mirror at ``path`` (``--package-mirror``), else ``$HARVEST_PACKAGE_MIRROR``, else None."""
    if path is None:
        env = os.environ.get(MIRROR_ENV, "").strip()
        if not env:
            return None
        path = Path(env)
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise PackageError(f"package mirror {root} is not a folder (check --package-mirror / ${MIRROR_ENV})")
    return PackageMirror(root=root, mapping=_read_map(root))


def _read_map(root: Path) -> dict[str, str]:
    file = root / MIRROR_MAP_FILE
    if not file.is_file():
        return {}
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PackageError(f"{file}: not valid TOML ({exc})") from None
    table = data.get("packages", data) if isinstance(data.get("packages"), dict) else data
    mapping: dict[str, str] = {}
    for key, value in table.items():
        if not isinstance(value, str) or not value.strip():
            raise PackageError(f"{file}: {key!r} must map to a path or git URL (a string)")
        if _URL_SCHEME.match(value) or re.match(r"^[^/@]+@[^/:]+:", value):
            mapping[key] = value
        else:
            mapping[key] = str((root / Path(value).expanduser()).resolve())
    return dict(sorted(mapping.items()))


def mirror_name(source: str) -> str:
    """The name a package fetched from a local package mirror is kept under in HARVEST_HOME/mirrors.

    Such a package has no public URL to record (the pin says ``url = ""`` and names it by ``source``),
    and the mirror's own path is a fact of this machine; the bare mirror is kept under this name with
    its remote pointing at the package mirror, so vendoring finds it again without either."""
    return f"package://{source}"


def is_local_location(location: str) -> bool:
    """A path or file:// URL (always reachable), as opposed to a network URL."""
    return location.startswith("file://") or not (_URL_SCHEME.match(location) or re.match(r"^[^/@]+@[^/:]+:", location))


@functools.lru_cache(maxsize=32)
def host_reachable(host: str, port: int = 443, timeout: float = 3.0) -> bool:
    """One TCP connection attempt (cached per process): the offline case answers in milliseconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def url_host(url: str) -> tuple[str, int] | None:
    """The host and port a network git URL would contact."""
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://(?:[^@/]+@)?([^/:]+)(?::(\d+))?", url)
    if match:
        default = {"http": 80, "git": 9418, "ssh": 22}.get(match.group(1), 443)
        return match.group(2), int(match.group(3) or default)
    match = re.match(r"^[^/@]+@([^/:]+):", url)
    return (match.group(1), 22) if match else None


def hub_git_url(hub_id: str, timeout: float = 15.0) -> str:
    """The git URL of a hub package, from the hub's API (its tarball links point at GitHub)."""
    url = f"{HUB_API}/{hub_id}.json"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise PackageError(f"cannot resolve package {hub_id}: the dbt hub does not list it") from None
        raise PackageError(f"cannot resolve package {hub_id}: the dbt hub answered {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PackageError(f"cannot resolve package {hub_id}: the dbt hub is unreachable ({exc})") from None
    versions = data.get("versions") if isinstance(data, dict) else None
    for info in (versions or {}).values():
        tarball = ((info or {}).get("downloads") or {}).get("tarball") or ""
        match = _CODELOAD.match(tarball)
        if match:
            return f"https://github.com/{match.group(1)}/{match.group(2)}.git"
    raise PackageError(f"cannot resolve package {hub_id}: the dbt hub gives no GitHub repository for it")


class Locator:
    """Turns hub ids and git URLs into cloneable locations: mirror first, network if reachable."""

    def __init__(self, mirror: PackageMirror | None, network: bool | None) -> None:
        self.mirror = mirror
        self.network = network

    def _online(self, host: str, port: int = 443) -> bool:
        if self.network is not None:
            return self.network
        return host_reachable(host, port)

    def _not_mirrored(self) -> str:
        if self.mirror is None:
            return "no package mirror was given"
        return f"not in the package mirror {self.mirror.root}"

    def hub(self, hub_id: str) -> str:
        if self.mirror is not None:
            found = self.mirror.hub_location(hub_id)
            if found:
                return found
        if not self._online(HUB_HOST):
            raise PackageError(
                f"cannot resolve package {hub_id}: {self._not_mirrored()} and the dbt hub is unreachable "
                "(pass --package-mirror)"
            )
        return hub_git_url(hub_id)

    def git(self, url: str) -> str:
        if self.mirror is not None:
            found = self.mirror.git_location(url)
            if found:
                return found
        if is_local_location(url):
            return url
        host = url_host(url)
        if host is None or not self._online(*host):
            raise PackageError(
                f"cannot resolve package {url}: {self._not_mirrored()} and the network is unreachable "
                "(pass --package-mirror)"
            )
        return url
