"""Spec parsing: the three forms, refusals, and a fuzzer that only ever sees SpecError."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dbt_harvest.core.errors import SpecError
from dbt_harvest.harvester.specs import parse_spec


def test_github_shorthand() -> None:
    spec = parse_spec("acme/analytics@1a2b3c4")
    assert (spec.kind, spec.owner, spec.repo, spec.rev) == ("github", "acme", "analytics", "1a2b3c4")
    assert spec.url == "https://github.com/acme/analytics.git"
    assert spec.slug == "acme__analytics" and spec.rev_is_sha


def test_git_urls_split_on_the_last_at() -> None:
    https = parse_spec("https://gitlab.example.com/acme/analytics.git@" + "a" * 40)
    assert (https.kind, https.owner, https.repo, https.rev) == ("url", "acme", "analytics", "a" * 40)
    ssh = parse_spec("git@github.com:acme/warehouse.git@abcdef1")
    assert (ssh.url, ssh.owner, ssh.repo) == ("git@github.com:acme/warehouse.git", "acme", "warehouse")


def test_local_paths_and_file_urls(tmp_path: Path) -> None:
    repo = tmp_path / "my repo"
    repo.mkdir()
    local = parse_spec("./my repo@abcdef1", cwd=tmp_path)
    assert local.kind == "local" and local.url == str(repo) and local.slug == "local__my-repo"
    file_url = parse_spec(f"file://{repo}@abcdef1")
    assert file_url.kind == "local" and file_url.url == str(repo)


def test_a_branch_is_parsed_but_not_a_sha() -> None:
    assert not parse_spec("acme/analytics@main").rev_is_sha


@pytest.mark.parametrize(
    "text", ["acme/analytics", "acme/analytics@", "@abc", "a b c@1234567", "acme/x@../evil", "acme/x@-rf"]
)
def test_malformed_specs_are_refused(text: str) -> None:
    with pytest.raises(SpecError, match="malformed spec"):
        parse_spec(text)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=60))
def test_fuzzed_specs_are_accepted_or_refused_cleanly(text: str) -> None:
    try:
        spec = parse_spec(text)
    except SpecError as exc:
        assert "\n" not in str(exc)
    else:
        assert spec.rev and spec.owner and spec.repo and "/" not in spec.slug


def test_an_origin_names_the_repository_publicly() -> None:
    from dbt_harvest.harvester.specs import origin_identity

    for origin in ("https://github.com/acme/Shop", "https://github.com/acme/Shop.git/", "git@github.com:acme/Shop.git"):
        found = origin_identity(origin)
        assert (found.slug, found.url, found.display) == ("acme__Shop", "https://github.com/acme/Shop.git", "acme/Shop")
    assert origin_identity("https://github.com/acme/Shop").url == parse_spec("acme/Shop@abcdef1").url
    token = origin_identity("https://x-access-token:ghp_s3cret@github.com/acme/Shop.git")
    assert token.url == "https://github.com/acme/Shop.git" and token.slug == "acme__Shop"
    other = origin_identity("https://deploy:s3cret@gitlab.example.com/data/acme/warehouse.git")
    assert other.slug == "acme__warehouse" and "s3cret" not in other.url and other.display == other.url


@pytest.mark.parametrize("origin", ["/tmp/some/copy", "./copy", "file:///tmp/copy", "local://x/y", "acme"])
def test_an_origin_that_is_not_a_public_url_is_refused(origin: str) -> None:
    from dbt_harvest.harvester.specs import origin_identity

    with pytest.raises(SpecError, match="public git URL"):
        origin_identity(origin)


def test_a_local_copy_without_origin_is_named_by_its_remote_or_project_never_its_path() -> None:
    from dbt_harvest.harvester.specs import local_identity, named_identity

    assert local_identity("https://github.com/acme/shop", "shop", "copy").url == "https://github.com/acme/shop.git"
    by_project = local_identity("/srv/git/shop.git", "shop_analytics", "copy")  # a local remote is no name
    assert (by_project.slug, by_project.url) == ("local__shop_analytics", "local://local/shop_analytics")
    assert local_identity(None, None, "my copy").slug == "local__my-copy"
    assert named_identity("acme/shop").url == "local://acme/shop" and named_identity("shop").slug == "local__shop"
    with pytest.raises(SpecError):
        named_identity("a/b/c")
