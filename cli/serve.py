"""`harvest serve openenv DATASET`: a dataset's tasks served as an OpenEnv environment (extra `openenv`).

One WebSocket session = one RepairEnvironment over the dataset's rows (materialized on demand into
HARVEST_HOME's caches, every build sandboxed); see `eval/adapters/openenv_server.py`. The server has no
authentication: keep it on loopback (the default) or a private network. Limits: --max-sessions environments at
once (WebSocket sessions and HTTP resets together; 429 past it), requests and WebSocket messages of at most
1 MiB (413), bad requests answered 400 with one line; the rows are untrusted input (corpora/untrusted.py).
"""

from __future__ import annotations

from pathlib import Path

import click

from dbt_harvest.cli._common import fails_cleanly
from dbt_harvest.core.errors import HarvestError


@click.group("serve")
def command() -> None:
    """Serve a dataset's tasks to an RL framework."""


@command.command("openenv")
@click.argument("dataset")
@click.option("--split", type=click.Choice(["train", "dev"]), default="train", show_default=True)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind (no authentication: keep it private)."
)
@click.option("--port", type=int, default=8000, show_default=True)
@click.option(
    "--max-sessions",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="Concurrent sessions (each builds in its own sandbox; about one core each).",
)
@click.option(
    "--repo-mirror",
    type=click.Path(path_type=Path, file_okay=False),
    help="Offline: repositories as <owner>/<name> or <owner>__<name>.",
)
@click.option(
    "--package-mirror",
    type=click.Path(path_type=Path, file_okay=False),
    help="Offline: the dbt package mirror (default $HARVEST_PACKAGE_MIRROR).",
)
@fails_cleanly
def openenv(
    dataset: str,
    split: str,
    host: str,
    port: int,
    max_sessions: int,
    repo_mirror: Path | None,
    package_mirror: Path | None,
) -> None:
    """Serve DATASET's SPLIT (a built folder or a Hub repo id) as an OpenEnv environment over HTTP/WebSocket."""
    import os

    from dbt_harvest.harvester.packages import MIRROR_ENV

    try:
        import uvicorn

        from dbt_harvest.eval.adapters.openenv_server import MAX_REQUEST_BYTES, make_app
    except ImportError as exc:
        raise HarvestError(
            f"the OpenEnv server needs the optional extra: pip install 'dbt-harvest[openenv]' ({exc})"
        ) from None
    if package_mirror is not None:
        os.environ[MIRROR_ENV] = str(package_mirror.resolve())
    app = make_app(dataset, split, repo_mirror=repo_mirror, max_concurrent_envs=max_sessions)
    click.echo(
        f"serving {dataset} ({split}) as OpenEnv on http://{host}:{port} (max {max_sessions} sessions)", err=True
    )
    uvicorn.run(app, host=host, port=port, log_level="warning", ws_max_size=MAX_REQUEST_BYTES)
