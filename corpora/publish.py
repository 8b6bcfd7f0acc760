"""`harvest publish`: upload one split of a built dataset folder to the Hugging Face Hub.

Rules: the test split is never uploaded (it is never built either); dev only to a private repo; a
private build (repositories without a redistributable license kept) only to a private repo. A private
upload (``--private``) is refused when the Hub repository already exists and is public: creating it
private would have left a public one public. The folder is re-hashed against its build manifest first;
then a staging folder is assembled holding exactly what goes up: ``data/<split>-<fp>-*.parquet``, the
gold files those rows reference, and a card rendered for that split. ``--dry-run`` prints that list
(path, bytes, sha256) and contacts nothing.

Publishing one split keeps the others: the card already on the Hub is read, and the splits it lists
stay in its ``configs`` (rendered in full when they come from the same build, kept as they are when
they come from another); this split's older data files are deleted in the same commit. The upload is
``HfApi.repo_info`` + ``create_repo`` + ``upload_folder`` with a per-request timeout; an unreachable
Hub is one honest line.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dbt_harvest.core import atomic
from dbt_harvest.corpora.build import read_manifest
from dbt_harvest.corpora.card import CardFacts, data_files, render, report_chart
from dbt_harvest.corpora.errors import PublishError

DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True)
class PlannedFile:
    path: str  # path in the Hub repo
    size: int
    sha256: str


@dataclass(frozen=True)
class PublishResult:
    repo_id: str
    split: str
    private: bool
    dry_run: bool
    files: tuple[PlannedFile, ...]
    commit_url: str = ""
    repo_private: bool | None = None  # the Hub repository's visibility after the upload (None: dry run)
    card_splits: tuple[str, ...] = ()  # the splits the uploaded card lists


def check_allowed(split: str, private: bool, manifest: dict) -> None:
    """Refuse the uploads the firewall forbids, with the reason."""
    if split == "test":
        raise PublishError("the test split is sealed and is never uploaded")
    built = manifest["facts"]["splits"]
    if split not in built:
        raise PublishError(f"split {split!r} is not in this build (it holds {', '.join(built)})")
    if split == "dev" and not private:
        raise PublishError("the dev split is uploaded only to a private repo: add --private")
    if not manifest["facts"]["public"] and not private:
        raise PublishError(
            "this folder is a private build (it keeps repositories without a redistributable license): add --private"
        )


def stage(folder: Path, split: str, dest: Path, hub_card: str | None = None) -> tuple[PlannedFile, ...]:
    """Assemble exactly what will be uploaded for ``split`` under ``dest``; return the plan.

    ``hub_card`` is the README.md the Hub repository holds now, if any: the splits it lists stay listed.
    """
    manifest = read_manifest(folder)
    facts = CardFacts.from_dict(manifest["facts"])
    picked = sorted(p for p in manifest["files"] if p.startswith(f"data/{split}-") and p.endswith(".parquet"))
    picked += [f"gold/{sha}.duckdb" for sha in manifest["gold"][split]]
    picked += [chart for chart in (report_chart(split),) if chart in manifest["files"]]
    if not any(p.startswith("data/") for p in picked):
        raise PublishError(f"{folder} holds no parquet shard for split {split!r}")
    for rel in picked:
        atomic.install_file(folder / rel, dest / rel)
    atomic.write_text(dest / "README.md", merged_card(facts, split, hub_card))
    plan = []
    for rel in ["README.md", *picked]:
        target = dest / rel
        plan.append(PlannedFile(rel, target.stat().st_size, atomic.sha256_file(target)))
    return tuple(plan)


def card_configs(card: str | None) -> dict[str, str]:
    """split -> data-file path of the default config of a card (README.md text); {} when there is none."""
    if not card or not card.startswith("---"):
        return {}
    try:
        meta = yaml.safe_load(card.split("---", 2)[1])
    except (yaml.YAMLError, IndexError):
        return {}
    out: dict[str, str] = {}
    for config in (meta or {}).get("configs", []) if isinstance(meta, dict) else []:
        if isinstance(config, dict) and config.get("config_name", "default") == "default":
            for entry in config.get("data_files", []) or []:
                if (
                    isinstance(entry, dict)
                    and isinstance(entry.get("split"), str)
                    and isinstance(entry.get("path"), str)
                ):
                    out[entry["split"]] = entry["path"]
    return out


def merged_card(facts: CardFacts, split: str, hub_card: str | None) -> str:
    """The card to upload with ``split``: every other split the Hub's card lists stays listed, rendered in
    full when it is the same data as this build's (same fingerprinted files), kept as it is otherwise."""
    others = {s: path for s, path in card_configs(hub_card).items() if s != split}
    same_build = [s for s, path in others.items() if s in facts.splits and data_files(facts, s)["path"] == path]
    ordered = [s for s in ("train", "dev", "test") if s == split or s in same_build]
    ordered += sorted(s for s in same_build if s not in ordered)
    foreign = {s: path for s, path in others.items() if s not in same_build}
    return render(facts, ordered, other_configs=foreign)


@contextmanager
def _client_timeout(timeout: float) -> Iterator[None]:
    """Bound every huggingface_hub request by ``timeout`` for the duration of the upload, then restore.

    Public API only: ``huggingface_hub.get_session()`` is the one shared client every HfApi call goes
    through, and its request event hooks run just before each send. HfApi passes ``timeout=None`` (no
    limit) explicitly on many calls, which overrides a client-wide default, so the hook sets the
    request's own timeout instead. The library's own hooks (offline mode, request ids) are kept."""
    import httpx2
    from huggingface_hub import get_session

    bound = httpx2.Timeout(timeout).as_dict()

    def limit(request: httpx2.Request) -> None:
        request.extensions["timeout"] = bound

    session = get_session()
    hooks = session.event_hooks
    session.event_hooks = {**hooks, "request": [*hooks.get("request", []), limit]}
    try:
        yield
    finally:
        session.event_hooks = hooks


def publish(
    folder: Path,
    repo_id: str,
    split: str,
    *,
    private: bool = False,
    dry_run: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    token: str | None = None,
    endpoint: str | None = None,
) -> PublishResult:
    """Check, stage, and (unless ``dry_run``) create the dataset repo and upload the staged folder."""
    manifest = read_manifest(folder)
    check_allowed(split, private, manifest)
    with tempfile.TemporaryDirectory(prefix="harvest-publish-") as tmp:
        if dry_run:
            plan = stage(folder, split, Path(tmp) / "staged")
            return PublishResult(repo_id, split, private, True, plan, card_splits=_listed(Path(tmp) / "staged"))
        commit_url, plan, repo_private = _upload(folder, Path(tmp), repo_id, split, private, timeout, token, endpoint)
        listed = _listed(Path(tmp) / "staged")
    return PublishResult(repo_id, split, private, False, plan, commit_url, repo_private, listed)


def _listed(staged: Path) -> tuple[str, ...]:
    return tuple(card_configs((staged / "README.md").read_text(encoding="utf-8")))


def _upload(
    folder: Path,
    tmp: Path,
    repo_id: str,
    split: str,
    private: bool,
    timeout: float,
    token: str | None,
    endpoint: str | None,
) -> tuple[str, tuple[PlannedFile, ...], bool]:
    """Check the repository's visibility, read its card, stage against it, create and upload; ->
    (commit URL, what was uploaded, whether the repository is private)."""
    import httpx2
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    api = HfApi(endpoint=endpoint, token=token)
    step = "read the repo's visibility"
    try:
        with _client_timeout(timeout):
            existing = _repo_private(api, repo_id)
            if private and existing is False:
                raise PublishError(
                    f"the Hub repository {repo_id} exists and is public, and this upload is private; make it private "
                    f"({endpoint}/datasets/{repo_id}/settings) or publish to another --repo-id"
                )
            step = "read the repo's dataset card"
            hub_card = _hub_card(api, repo_id, tmp / "hub-card") if existing is not None else None
            plan = stage(folder, split, tmp / "staged", hub_card)
            if existing is None:
                step = "create the repo"
                api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
            step = "upload the files (the repo exists now)"
            info = api.upload_folder(
                folder_path=str(tmp / "staged"),
                repo_id=repo_id,
                repo_type="dataset",
                commit_message=f"dbt-harvest: {split} split",
                delete_patterns=[f"data/{split}-*"],
            )
    except (httpx2.ConnectError, httpx2.TimeoutException, httpx2.NetworkError) as exc:
        raise PublishError(
            f"could not reach the Hub at {endpoint} to {step} ({type(exc).__name__}): offline, or HF_ENDPOINT is wrong; "
            "nothing was committed"
        ) from None
    except ValueError as exc:  # the Hub's README.md metadata validation
        raise PublishError(f"the Hub rejected the dataset card: {' '.join(str(exc).split())}") from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise PublishError(f"the Hub refused to {step} (HTTP {status}): {str(exc).splitlines()[0]}") from None
    return str(getattr(info, "commit_url", "")), plan, bool(private if existing is None else existing)


def _repo_private(api: Any, repo_id: str) -> bool | None:
    """Whether the dataset repository is private; None when it does not exist (or this token cannot see it)."""
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        return bool(api.repo_info(repo_id, repo_type="dataset").private)
    except RepositoryNotFoundError:
        return None


def _hub_card(api: Any, repo_id: str, dest: Path) -> str | None:
    """The README.md the repository holds now, or None."""
    from huggingface_hub.errors import EntryNotFoundError

    try:
        path = api.hf_hub_download(repo_id, "README.md", repo_type="dataset", local_dir=str(dest))
    except EntryNotFoundError:
        return None
    return Path(path).read_text(encoding="utf-8")
