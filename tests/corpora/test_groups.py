"""Split groups from real repositories: forks, copies, package families, shared files."""

from __future__ import annotations

from corpora_world import hub

from dbt_harvest.corpora.groups import explain_groups, split_groups


def test_fork_with_shared_root_commit_is_grouped_and_stranger_is_not(world, make):
    base = make("acme/analytics")
    fork = make("bob/analytics-fork", fork_of="acme/analytics", files={"models/extra.sql": "select 2 as id -- bob\n"})
    other = make("zed/warehouse")
    assert set(base.root_commits) == set(fork.root_commits)
    groups = split_groups([base, fork, other])
    assert groups == {"acme/analytics": tuple(sorted([base.id, fork.id])), "zed/warehouse": (other.id,)}
    reasons = explain_groups([base, fork, other])[0].reasons
    assert any("shared root commit" in r for r in reasons)


def test_copy_without_history_same_name_most_files_identical(world, make):
    files = {f"models/m{i}.sql": f"select {i} as id -- shared body {i}\n" for i in range(4)}
    a = make("one/shop", files={**files, "models/own_a.sql": "select 'a' as x\n"}, project_name="shop")
    b = make("two/shop-copy", files={**files, "models/own_b.sql": "select 'b' as x\n"}, project_name="shop")
    assert not set(a.root_commits) & set(b.root_commits)
    groups = explain_groups([a, b])
    assert len(groups) == 1
    assert any("same project name 'shop', 80%" in r for r in groups[0].reasons)


def test_same_name_without_shared_files_stays_apart(world, make):
    a = make("one/my_project", files={"models/a.sql": "select 'one' as x\n"}, project_name="my_new_project")
    b = make("two/my_project", files={"models/a.sql": "select 'two' as x\n"}, project_name="my_new_project")
    assert len(split_groups([a, b])) == 2


def test_package_and_its_source_package_share_a_group(world, make):
    pkg = make("fivetran/dbt_stripe", project_name="stripe")
    src = make("fivetran/dbt_stripe_source", project_name="stripe_source")
    stranger = make("fivetran/dbt_zendesk", project_name="zendesk")
    groups = explain_groups([pkg, src, stranger])
    joined = [g for g in groups if len(g.pins) == 2]
    assert len(joined) == 1 and set(joined[0].pins) == {pkg.id, src.id}
    assert sum("_source package" in r for r in joined[0].reasons) == 1


def test_dependency_on_pinned_package_with_models_groups_but_macro_only_does_not(world, make):
    family = make("acme/dbt_billing", project_name="billing")
    macros = make("acme/dbt_macros", files={"macros/x.sql": "{% macro x() %}1{% endmacro %}\n"}, project_name="macros")
    user = make(
        "acme/finance", packages=(hub("acme/billing", "https://github.com/acme/dbt_billing"), hub("acme/macros"))
    )
    groups = split_groups([family, macros, user])
    assert tuple(sorted([family.id, user.id])) in groups.values()
    assert (macros.id,) in groups.values()


def test_identical_model_file_groups_but_empty_file_does_not(world, make):
    a = make("x/one", files={"models/a.sql": "select 42 as answer\n", "models/e.sql": ""})
    b = make("y/two", files={"models/b.sql": "select 42 as answer\n"})
    c = make("z/three", files={"models/e.sql": "", "models/c.sql": "select 3\n"})
    groups = split_groups([a, b, c])
    assert tuple(sorted([a.id, b.id])) in groups.values()
    assert (c.id,) in groups.values()


def test_two_commits_of_one_repository_are_one_group(world, make):
    first = make("acme/shop")
    world.repos.pop("acme/shop")
    second = make(
        "acme/shop-again",
        fork_of="acme/shop",
        files={"models/more.sql": "select 5\n"},
        url="https://github.com/acme/shop.git",
    )
    assert first.id != second.id
    assert list(split_groups([first, second])) == ["acme/shop"]
