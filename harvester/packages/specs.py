"""What a dbt project asks for: its package specs, read with dbt's own parser, and its lock file.

Why it exists: resolution must see exactly what `dbt deps` would see. So the YAML of ``packages.yml`` /
``dependencies.yml`` / ``package-lock.yml`` is rendered (``env_var``) and validated by dbt-core's own
contracts, and the lock's ``sha1_hash`` is compared with the hash dbt itself computes; the result is
turned into small frozen records (hub, git, local) that the rest of the resolver works with.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import yaml

from dbt_harvest.core.errors import PackageError

PACKAGES_FILE = "packages.yml"
DEPENDENCIES_FILE = "dependencies.yml"
LOCK_FILE = "package-lock.yml"


@dataclass(frozen=True)
class HubSpec:
    """``package: org/name`` with one or more version specifiers (dbt's semver strings)."""

    package: str
    versions: tuple[str, ...]
    install_prerelease: bool = False


@dataclass(frozen=True)
class GitSpec:
    """``git: URL`` at ``revision`` ("" means the remote's HEAD), optionally a ``subdirectory``."""

    git: str
    revision: str = ""
    subdirectory: str = ""


@dataclass(frozen=True)
class LocalSpec:
    """``local: PATH``, relative to the project that declares it."""

    local: str


PackageSpec: TypeAlias = HubSpec | GitSpec | LocalSpec


@dataclass(frozen=True)
class Declared:
    """A project's declared packages, the file they came from and dbt's hash of them."""

    specs: tuple[PackageSpec, ...]
    sha1_hash: str
    file: str


def parse_yaml(text: str | bytes, where: str) -> dict[str, Any]:
    """A YAML mapping (empty file -> {}); anything else is a PackageError naming ``where``."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())
        raise PackageError(f"{where}: not valid YAML ({first})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PackageError(f"{where}: expected a mapping at the top level")
    return data


def declared_from_texts(packages_yml: str | bytes | None, dependencies_yml: str | bytes | None, where: str) -> Declared:
    """The package specs of one project, from the texts of its two possible files (None = absent)."""
    packages = parse_yaml(packages_yml, f"{where}/{PACKAGES_FILE}") if packages_yml is not None else {}
    dependencies = parse_yaml(dependencies_yml, f"{where}/{DEPENDENCIES_FILE}") if dependencies_yml is not None else {}
    if "packages" in packages and "packages" in dependencies:
        raise PackageError(
            f"{where}: both {PACKAGES_FILE} and {DEPENDENCIES_FILE} declare packages (dbt refuses this); keep one"
        )
    if "packages" in dependencies:
        data, file = {"packages": dependencies["packages"]}, DEPENDENCIES_FILE
    else:
        data, file = {"packages": packages.get("packages") or []}, PACKAGES_FILE
    specs, digest = _dbt_specs(data, f"{where}/{file}")
    return Declared(specs=specs, sha1_hash=digest, file=file)


def read_declared(project_dir: Path) -> Declared:
    """The package specs of a project folder on disk."""
    return declared_from_texts(
        _read_optional(project_dir / PACKAGES_FILE),
        _read_optional(project_dir / DEPENDENCIES_FILE),
        str(project_dir),
    )


def read_lock(project_dir: Path) -> tuple[tuple[PackageSpec, ...], str] | None:
    """The specs of a shipped ``package-lock.yml`` and its recorded ``sha1_hash`` (None if absent)."""
    text = _read_optional(project_dir / LOCK_FILE)
    if text is None:
        return None
    where = f"{project_dir}/{LOCK_FILE}"
    data = parse_yaml(text, where)
    recorded = str(data.get("sha1_hash") or "")
    specs, _ = _dbt_specs({"packages": data.get("packages") or []}, where)
    return specs, recorded


def _read_optional(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise PackageError(f"cannot read {path}: {exc}") from None


def _dbt_specs(data: dict[str, Any], where: str) -> tuple[tuple[PackageSpec, ...], str]:
    """Render and validate with dbt-core's contracts; return our records and dbt's sha1 of the specs.

    This is dbt's ``package_config_from_data`` and ``_create_sha1_hash`` (dbt/task/deps.py) without
    importing all of ``dbt.config`` (seconds): dbt's renderer is loaded only when Jinja is present.
    """
    if not isinstance(data.get("packages"), list):
        raise PackageError(f"{where}: 'packages' must be a list")
    if not data["packages"]:
        return (), ""
    from dbt.contracts.project import PackageConfig

    unrendered = copy.deepcopy(data)
    try:
        rendered = _render(data) if _has_jinja(data) else copy.deepcopy(data)
        for entry, original in zip(rendered["packages"], unrendered["packages"]):
            if isinstance(entry, dict):
                entry["unrendered"] = original
        PackageConfig.validate(rendered)
        config = PackageConfig.from_dict(rendered)
    except Exception as exc:  # dbt raises its own (compilation/validation) error types
        message = " ".join(str(getattr(exc, "msg", None) or getattr(exc, "message", None) or exc).split())
        raise PackageError(f"{where}: invalid package spec ({message})") from None
    specs = tuple(_from_dbt(contract, where) for contract in config.packages)
    lines = sorted(json.dumps(contract.to_dict(), sort_keys=True) for contract in config.packages)
    return specs, hashlib.sha1("\n".join(lines).encode("utf-8")).hexdigest()


def _has_jinja(value: Any) -> bool:
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_has_jinja(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_jinja(v) for v in value)
    return False


def _render(data: dict[str, Any]) -> dict[str, Any]:
    """dbt's PackageRenderer (``env_var`` and friends), as `dbt deps` renders packages.yml, but with an
    empty environment: packages.yml is the repository's text, and ``{{ env_var('HF_TOKEN') }}`` in a git
    URL would otherwise carry the harvester's secrets to a host the repository names (a variable
    without a default is then an invalid spec, said in one line)."""
    from dbt.config.renderer import PackageRenderer
    from dbt_common.context import set_invocation_context

    set_invocation_context({})
    return PackageRenderer({}).render_data(copy.deepcopy(data))


def _from_dbt(contract: Any, where: str) -> PackageSpec:
    from dbt.contracts.project import GitPackage, LocalPackage, RegistryPackage

    if isinstance(contract, RegistryPackage):
        return HubSpec(
            package=contract.package,
            versions=tuple(contract.get_versions()),
            install_prerelease=bool(contract.install_prerelease),
        )
    if isinstance(contract, GitPackage):
        revisions = contract.get_revisions()
        return GitSpec(
            git=contract.git,
            revision=revisions[0] if revisions else "",
            subdirectory=(contract.subdirectory or "").strip("/"),
        )
    if isinstance(contract, LocalPackage):
        return LocalSpec(local=contract.local)
    kind = type(contract).__name__.replace("Package", "").lower() or "unknown"
    raise PackageError(f"{where}: {kind} packages are not supported offline; use a hub, git or local package")
