"""`harvest publish`: upload one split of a built dataset folder to the Hugging Face Hub.

Rules: the test split is never uploaded (it is never built either); dev only to a private repo; a
private build (repositories without a redistributable license kept) only to a private repo. The folder is
re-hashed against its build manifest first; then a staging folder is assembled holding exactly what goes
up: ``data/<split>-*.parquet``, the gold files those rows reference, and a card rendered for that split
alone. ``--dry-run`` prints that list (path, bytes, sha256). The upload is ``HfApi.create_repo`` +
``HfApi.upload_folder`` with a per-request timeout; an unreachable Hub is one honest line.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from corpora.build import read_manifest
from corpora.card import CardFacts, render
from corpora.errors import PublishError
from core import atomic

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
        raise PublishError("this folder is a private build (it keeps repositories without a redistributable license): add --private")


def stage(folder: Path, split: str, dest: Path) -> tuple[PlannedFile, ...]:
    """Assemble exactly what will be uploaded for ``split`` under ``dest``; return the plan."""
    manifest = read_manifest(folder)
    facts = CardFacts.from_dict(manifest["facts"])
    picked = sorted(p for p in manifest["files"] if p.startswith(f"data/{split}-") and p.endswith(".parquet"))
    picked += [f"gold/{sha}.duckdb" for sha in manifest["gold"][split]]
    if not any(p.startswith("data/") for p in picked):
        raise PublishError(f"{folder} holds no parquet shard for split {split!r}")
    for rel in picked:
        atomic.install_file(folder / rel, dest / rel)
    atomic.write_text(dest / "README.md", render(facts, [split]))
    plan = []
    for rel in ["README.md", *picked]:
        target = dest / rel
        plan.append(PlannedFile(rel, target.stat().st_size, atomic.sha256_file(target)))
    return tuple(plan)


@contextmanager
def _client_timeout(timeout: float) -> Iterator[None]:
    """Give every huggingface_hub request a timeout (its default client has none), then restore it."""
    import httpx2
    from huggingface_hub.utils import _http

    def factory() -> httpx2.Client:
        return httpx2.Client(
            event_hooks={"request": [_http.hf_request_event_hook]}, follow_redirects=True, timeout=timeout
        )

    _http.set_client_factory(factory)
    try:
        yield
    finally:
        _http.set_client_factory(_http.default_client_factory)


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
        plan = stage(folder, split, Path(tmp))
        if dry_run:
            return PublishResult(repo_id, split, private, True, plan)
        commit_url = _upload(Path(tmp), repo_id, split, private, timeout, token, endpoint)
    return PublishResult(repo_id, split, private, False, plan, commit_url)


def _upload(staged: Path, repo_id: str, split: str, private: bool, timeout: float,
            token: str | None, endpoint: str | None) -> str:
    import httpx2
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    endpoint = endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    api = HfApi(endpoint=endpoint, token=token)
    step = "create the repo"
    try:
        with _client_timeout(timeout):
            api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
            step = "upload the files (the repo exists now)"
            info = api.upload_folder(
                folder_path=str(staged), repo_id=repo_id, repo_type="dataset",
                commit_message=f"dbt-harvest: {split} split",
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
    return str(getattr(info, "commit_url", ""))
