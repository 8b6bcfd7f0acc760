"""GitStore against real repositories written at test time: mirrors, exact commits, safe exports."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pygit2
import pytest

from dbt_harvest.core.errors import FetchError
from dbt_harvest.harvester.gitrepos import Gitlink, Symlink, make_git_repo
from dbt_harvest.harvester.gitstore import GitStore, Resolved, mirror_key

SIG = pygit2.Signature("tester", "tester@example.invalid", 1_700_000_000, 0)


def _project_files() -> dict[str, object]:
    return {
        "dbt_project.yml": "name: shop\nversion: '1.0.0'\nprofile: shop\n",
        "models/orders.sql": "select 1 as id\n",
        "scripts/run.sh": "#!/bin/sh\necho hi\n",
    }


@pytest.fixture()
def source(tmp_path: Path):
    """A small repository: three commits on main, a tag and a second branch."""
    return make_git_repo(
        None,
        tmp_path / "src",
        commits=[
            {"files": _project_files(), "tag": "v0.1.0"},
            {"files": {"models/customers.sql": "select 2 as id\n"}},
            {"files": {"README.md": "shop\n"}},
        ],
    )


@pytest.fixture()
def store(tmp_path: Path) -> GitStore:
    return GitStore(tmp_path / "mirrors")


def test_mirror_is_bare_keyed_readably_and_fetches_later_commits(source, store, tmp_path):
    repo = store.mirror(str(source.path))
    assert repo.is_bare
    assert Path(repo.path).parent == store.root
    assert Path(repo.path).name == mirror_key(str(source.path))
    assert "__src-" in Path(repo.path).name
    assert set(store.tags(repo)) == {"v0.1.0"}
    # a later commit in the source shows up on the next use of the mirror (a fresh store)
    src = pygit2.Repository(str(source.path))
    new = src.create_commit(
        "refs/heads/main", SIG, SIG, "more\n", src[source.head].tree.id, [pygit2.Oid(hex=source.head)]
    )
    again = GitStore(store.root).mirror(str(source.path))
    assert again.path == repo.path
    assert store.resolve(again, str(new)).commit == str(new)
    # file:// URLs name the same mirror as the plain path
    assert Path(store.mirror(f"file://{source.path}").path) == Path(repo.path)
    assert [p.name for p in store.root.iterdir() if p.name.endswith(".tmp")] == []


def test_unreachable_url_is_one_line_fetch_error(store, tmp_path):
    with pytest.raises(FetchError, match=r"^cannot reach .*nowhere") as info:
        store.mirror(str(tmp_path / "nowhere"))
    assert "\n" not in str(info.value)
    assert not store.root.exists() or list(store.root.iterdir()) == []


def test_resolve_full_and_short_sha(source, store):
    repo = store.mirror(str(source.path))
    first = source.commits[0]
    assert store.resolve(repo, first).commit == first
    assert store.resolve(repo, first.upper()).commit == first
    found = store.resolve(repo, first[:7])
    assert (found.commit, found.ref) == (first, "")


def test_unknown_commit_is_refused(source, store):
    repo = store.mirror(str(source.path))
    with pytest.raises(FetchError, match="unknown commit"):
        store.resolve(repo, "0" * 40)
    with pytest.raises(FetchError, match="unknown commit"):
        store.resolve(repo, "0000000")
    with pytest.raises(FetchError, match="unknown revision"):
        store.resolve(repo, "no-such-branch")


def test_commit_on_no_branch_or_tag_is_unknown(source, store):
    repo = store.mirror(str(source.path))
    src = pygit2.Repository(str(source.path))
    dangling = src.create_commit(None, SIG, SIG, "dangling\n", src[source.head].tree.id, [])
    with pytest.raises(FetchError, match=f"unknown commit '{dangling}'"):
        store.resolve(repo, str(dangling))


def test_branch_and_tag_need_resolve_ref(source, store):
    repo = store.mirror(str(source.path))
    with pytest.raises(FetchError, match="is a branch.*--resolve-ref"):
        store.resolve(repo, "main")
    with pytest.raises(FetchError, match="is a tag.*--resolve-ref"):
        store.resolve(repo, "v0.1.0")
    assert store.resolve(repo, "main", allow_ref=True) == Resolved(commit=source.head, ref="refs/heads/main")
    tagged = store.resolve(repo, "v0.1.0", allow_ref=True)
    assert (tagged.commit, tagged.ref) == (source.commits[0], "refs/tags/v0.1.0")


def _colliding_commits(repo: pygit2.Repository, tree: str) -> tuple[str, str]:
    """Write two commits whose ids share their first 7 hex digits (a birthday search, ~30k tries)."""
    seen: dict[str, bytes] = {}
    for n in range(2_000_000):
        body = (f"tree {tree}\nauthor a <a@x> 0 +0000\ncommitter a <a@x> 0 +0000\n\nm{n}\n").encode()
        sha = hashlib.sha1(b"commit %d\0" % len(body) + body).hexdigest()
        other = seen.setdefault(sha[:7], body)
        if other is not body:
            ids = [str(repo.odb.write(pygit2.enums.ObjectType.COMMIT, b)) for b in (other, body)]
            assert ids[0][:7] == ids[1][:7] and ids[0] != ids[1]
            return ids[0], ids[1]
    raise AssertionError("no collision found")


def test_ambiguous_short_sha_is_refused(store, tmp_path):
    repo = pygit2.init_repository(str(tmp_path / "amb"), bare=True)
    tree = str(repo.TreeBuilder().write())
    one, two = _colliding_commits(repo, tree)
    with pytest.raises(FetchError, match="ambiguous"):
        store.resolve(repo, one[:7])
    assert store.resolve(repo, one[:8] if one[:8] != two[:8] else one).commit == one


def test_export_writes_tree_without_git(source, store, tmp_path):
    repo = store.mirror(str(source.path))
    dest = tmp_path / "ws"
    report = store.export(repo, source.head, dest)
    names = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert names == ["README.md", "dbt_project.yml", "models/customers.sql", "models/orders.sql", "scripts/run.sh"]
    assert not any(p.name == ".git" for p in dest.rglob("*"))
    assert report.files == 5 and report.skipped == ()
    assert report.tree == str(repo[source.head].tree.id)
    assert (dest / "models/orders.sql").read_text() == "select 1 as id\n"
    # an older commit exports the older tree
    old = store.export(repo, source.commits[0], tmp_path / "old")
    assert old.files == 3 and not (tmp_path / "old/README.md").exists()


def test_export_skips_and_records_unsafe_entries(store, tmp_path):
    src = make_git_repo(
        None,
        tmp_path / "src",
        commits=[
            {
                "files": {
                    "dbt_project.yml": "name: p\n",
                    "data/big.csv": b"x" * 5000,
                    "data/small.csv": "a\n1\n",
                    "escape": Symlink("../../outside.txt"),
                    "absolute": Symlink("/etc/passwd"),
                    "inside": Symlink("data/small.csv"),
                    "loop/d": Symlink("."),
                    "loop/x": Symlink("d/d/../../.."),  # lexically inside, really two levels up
                    "vendor/lib": Gitlink("1" * 40),
                }
            }
        ],
    )
    (tmp_path / "outside.txt").write_text("secret")
    repo = store.mirror(str(src.path))
    dest = tmp_path / "ws"
    report = store.export(repo, src.head, dest, max_file_bytes=1000)
    reasons = {s.path: s.reason for s in report.skipped}
    assert set(reasons) == {"absolute", "escape", "data/big.csv", "vendor/lib", "loop/x"}
    assert "submodule" in reasons["vendor/lib"]
    assert "over the 1000-byte bound" in reasons["data/big.csv"]
    assert "symlink leaves the tree" in reasons["escape"]
    # an absolute target is a path of the machine the repository came from: never recorded in a pin
    assert reasons["absolute"] == "symlink leaves the tree (-> an absolute path)"
    assert not (dest / "escape").exists() and not os.path.lexists(dest / "loop/x")
    assert not (dest / "data/big.csv").exists() and not (dest / "vendor/lib").exists()
    assert os.readlink(dest / "inside") == "data/small.csv"
    assert (dest / "inside").read_text() == "a\n1\n"
    assert report.files == 2


def _commit_with_raw_tree(repo: pygit2.Repository, bad_name: str) -> str:
    blob = repo.create_blob(b"payload")
    inner = repo.odb.write(
        pygit2.enums.ObjectType.TREE, b"100644 " + bad_name.encode() + b"\0" + bytes.fromhex(str(blob))
    )
    builder = repo.TreeBuilder()
    builder.insert("a.txt", blob, pygit2.enums.FileMode.BLOB)  # written before the bad entry is met
    builder.insert("sub", inner, pygit2.enums.FileMode.TREE)
    return str(repo.create_commit(None, SIG, SIG, "bad\n", builder.write(), []))


@pytest.mark.parametrize("bad_name", ["../evil", "..", ".git", "a/b"])
def test_path_traversal_is_refused_and_nothing_half_written(store, tmp_path, bad_name):
    repo = pygit2.init_repository(str(tmp_path / "raw"), bare=True)
    commit = _commit_with_raw_tree(repo, bad_name)
    dest = tmp_path / "out" / "ws"
    with pytest.raises(FetchError, match="refusing to export"):
        store.export(repo, commit, dest)
    assert not dest.exists()
    assert list((tmp_path / "out").iterdir()) == []
    assert not (tmp_path / "evil").exists()


def test_too_many_files_fails_atomically(source, store, tmp_path):
    repo = store.mirror(str(source.path))
    dest = tmp_path / "ws"
    with pytest.raises(FetchError, match="more than 2 files"):
        store.export(repo, source.head, dest, max_files=2)
    assert not dest.exists() and list(tmp_path.glob(".ws.*")) == []
    with pytest.raises(FetchError, match="not empty"):
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "x").write_text("x")
        store.export(repo, source.head, tmp_path / "full")


def test_export_subdirectory(source, store, tmp_path):
    repo = store.mirror(str(source.path))
    report = store.export(repo, source.head, tmp_path / "models", subdir="models")
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["customers.sql", "orders.sql"]
    assert report.files == 2
    with pytest.raises(FetchError, match="no folder"):
        store.export(repo, source.head, tmp_path / "x", subdir="nope")


def test_read_file_tags_and_root_commits(store, tmp_path):
    src = make_git_repo(None, tmp_path / "a", commits=[{"files": {"x.txt": "1"}}, {"files": {"y.txt": "2"}}])
    repo = pygit2.Repository(str(src.path))
    # a second, unrelated history merged in: the merge has two root commits
    other = repo.create_commit(None, SIG, SIG, "other root\n", repo[src.head].tree.id, [])
    merge = repo.create_commit(
        "refs/heads/main", SIG, SIG, "merge\n", repo[src.head].tree.id, [pygit2.Oid(hex=src.head), other]
    )
    repo.create_tag("v1.0.0", merge, pygit2.enums.ObjectType.COMMIT, SIG, "annotated\n")
    repo.references.create("refs/tags/light", pygit2.Oid(hex=src.commits[0]))
    mirror = store.mirror(str(src.path))
    assert store.root_commits(mirror, str(merge)) == tuple(sorted([src.commits[0], str(other)]))
    assert store.root_commits(mirror, src.head) == (src.commits[0],)
    assert store.tags(mirror) == {"light": src.commits[0], "v1.0.0": str(merge)}
    assert store.read_file(mirror, src.head, "y.txt") == b"2"
    assert store.read_file(mirror, src.commits[0], "y.txt") is None
    assert store.read_file(mirror, src.head, "../x.txt") is None


def test_a_missing_file_dbt_never_reads_is_skipped_and_recorded(store, tmp_path):
    """A snapshot that left out a large binary (a committed virtualenv's library) still exports: the file is
    recorded as skipped. A missing file dbt may read (SQL, YAML, a seed) still refuses the export."""
    src = make_git_repo(
        None,
        tmp_path / "venv",
        commits=[{"files": {**_project_files(), "env/lib/_speedups.so": "\x7fELF pretend\n", "seeds/s.csv": "a\n1\n"}}],
    )
    repo = store.mirror(str(src.path))
    tree = repo[src.head].tree

    def drop(path: str) -> None:
        blob_id = tree[path].id
        loose = Path(repo.path) / "objects" / str(blob_id)[:2] / str(blob_id)[2:]
        loose.chmod(0o644)
        loose.unlink()

    drop("env/lib/_speedups.so")
    report = GitStore(store.root).export(pygit2.Repository(repo.path), src.head, tmp_path / "out")
    assert [(s.path, "absent from the mirror" in s.reason) for s in report.skipped] == [("env/lib/_speedups.so", True)]
    assert (tmp_path / "out" / "dbt_project.yml").is_file() and not (tmp_path / "out" / "env/lib/_speedups.so").exists()
    drop("seeds/s.csv")
    with pytest.raises(FetchError, match="incomplete in the mirror"):
        GitStore(store.root).export(pygit2.Repository(repo.path), src.head, tmp_path / "out2")
    assert not (tmp_path / "out2").exists()


def test_a_mirror_missing_an_object_is_one_fetch_error(source, store, tmp_path):
    """A partial repository (a blob absent) is refused with one line, nothing half-exported."""
    repo = store.mirror(str(source.path))
    commit = source.commits[-1]
    tree = repo[commit].tree
    blob_id = next(entry.id for entry in tree if entry.type_str == "blob")
    loose = Path(repo.path) / "objects" / str(blob_id)[:2] / str(blob_id)[2:]
    assert loose.exists(), "the test needs a loose object to remove"
    loose.chmod(0o644)
    loose.unlink()
    with pytest.raises(FetchError, match="incomplete in the mirror"):
        GitStore(store.root).export(pygit2.Repository(repo.path), commit, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
