"""`harvest publish`: upload one split of a built dataset folder to the Hugging Face Hub."""

from __future__ import annotations

from pathlib import Path

import click

from dbt_harvest.cli._common import echo_json, fails_cleanly, json_option, say, shown


@click.command("publish")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--repo-id", required=True, help="Hub dataset repo, e.g. acme/dbt-repair.")
@click.option(
    "--split",
    required=True,
    type=click.Choice(["train", "dev", "test"]),
    help="The split to upload (test is always refused; dev needs --private).",
)
@click.option(
    "--private",
    is_flag=True,
    help="Upload only to a private repo: create it private; refuse one that exists and is public.",
)
@click.option("--dry-run", is_flag=True, help="Print exactly what would be uploaded; contact nothing.")
@click.option(
    "--timeout", type=click.FloatRange(min=1), default=60.0, show_default=True, help="Seconds per HTTP request."
)
@json_option
@fails_cleanly
def command(
    folder: Path, repo_id: str, split: str, private: bool, dry_run: bool, timeout: float, as_json: bool
) -> None:
    """Create the dataset repo (HfApi.create_repo) and upload the split (upload_folder). Token: HF_TOKEN."""
    from dbt_harvest.corpora.publish import publish

    result = publish(folder, repo_id, split, private=private, dry_run=dry_run, timeout=timeout)
    if as_json:
        echo_json(
            {
                "repo_id": result.repo_id,
                "split": result.split,
                "private": result.private,
                "dry_run": result.dry_run,
                "commit_url": result.commit_url,
                "repo_private": result.repo_private,
                "card_splits": list(result.card_splits),
                "files": [f.__dict__ for f in result.files],
            }
        )
        return
    verb = "would upload" if dry_run else "uploaded"
    for f in result.files:
        say(f"{shown(f.path)}\t{f.size}\t{f.sha256}")
    total = sum(f.size for f in result.files)
    where = " (private repository)" if result.repo_private or (dry_run and private) else ""
    say(
        f"{verb} {len(result.files)} file(s), {total} bytes, to dataset {shown(repo_id)}{where}"
        f"{': ' + shown(result.commit_url) if result.commit_url else ''}"
    )
    if result.card_splits:
        say(f"the card lists: {', '.join(result.card_splits)}")
