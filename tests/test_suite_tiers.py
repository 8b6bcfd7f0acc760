"""The suite's two tiers (tests/tiers.py): which tests each run plays, and the rule that every deep test names
default tests that cover its outcome, checked on small suites run by a real pytest and on this suite itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tiers import cover_errors, defined_tests, runs, suite_errors

ROOT = Path(__file__).resolve().parent.parent


def test_the_default_tier_leaves_deep_tests_out_unless_named_and_the_others_select() -> None:
    assert runs("default", deep=False, named=False) and not runs("default", deep=True, named=False)
    assert runs("default", deep=True, named=True)  # a deep test or its file named on the command line
    assert runs("deep", deep=True, named=False) and not runs("deep", deep=False, named=True)
    assert all(runs("all", deep=d, named=n) for d in (True, False) for n in (True, False))


MODULE = """
import pytest

def test_cheap():
    pass

@pytest.mark.deep(covered_by=("tests/test_m.py::test_cheap",))
def test_second_path():
    pass

class TestGroup:
    @pytest.mark.deep
    def test_bare(self):
        pass
"""


def test_a_module_s_tests_are_found_with_whether_each_is_deep() -> None:
    assert defined_tests(MODULE) == {"test_cheap": False, "test_second_path": True, "TestGroup::test_bare": True}


def test_covered_by_must_name_existing_default_tests() -> None:
    sources = {"tests/test_m.py": MODULE, "tests/gone.py": None}
    assert cover_errors({"tests/test_m.py::test_second_path": ("tests/test_m.py::test_cheap",)}, sources) == []
    # a parametrized test is named with or without its parameters
    assert cover_errors({"x": ("tests/test_m.py::test_cheap[a-1]",)}, sources) == []
    errors = cover_errors(
        {
            "a": None,  # the bare marker
            "b": (),
            "c": ("tests/test_m.py::test_missing",),
            "d": ("tests/gone.py::test_cheap",),
            "e": (
                "tests/test_m.py::TestGroup::test_bare",
            ),  # covered by another deep test: nothing covers it by default
            "f": "tests/test_m.py::test_cheap",  # a string, not a tuple of them
        },
        sources,
    )
    assert [e.split(":", 1)[0] for e in errors] == ["a", "b", "c", "d", "e", "f"]
    assert "does not exist" in errors[2] and "does not exist" in errors[3] and "deep itself" in errors[4]


def _suite(tmp_path: Path, body: str) -> Path:
    (tmp_path / "tests").mkdir(parents=True)
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "conftest.py").write_text('pytest_plugins = ["tests_tiers_under_test"]\n')
    (tmp_path / "tests_tiers_under_test.py").write_text((ROOT / "tests" / "tiers.py").read_text())
    (tmp_path / "tests" / "test_m.py").write_text(body)
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    return tmp_path


def _collect(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _collected(proc: subprocess.CompletedProcess[str]) -> set[str]:
    return {line.split("::")[-1] for line in proc.stdout.splitlines() if "::" in line}


def test_a_real_pytest_run_plays_each_tier_and_refuses_a_deep_test_without_a_cover(tmp_path: Path) -> None:
    body = MODULE.replace(
        "    @pytest.mark.deep\n", '    @pytest.mark.deep(covered_by=("tests/test_m.py::test_cheap",))\n'
    )
    root = _suite(tmp_path / "good", body)
    default = _collect(root)
    assert default.returncode == 0, default.stdout + default.stderr
    assert _collected(default) == {"test_cheap"} and "2 deselected" in default.stdout
    assert _collected(_collect(root, "--tier", "deep")) == {"test_second_path", "test_bare"}
    assert _collected(_collect(root, "--tier", "all")) == {"test_cheap", "test_second_path", "test_bare"}
    # a file or a test named on the command line runs whole
    assert _collected(_collect(root, "tests/test_m.py")) == {"test_cheap", "test_second_path", "test_bare"}
    assert _collected(_collect(root, "tests/test_m.py::test_second_path")) == {"test_second_path"}
    assert _collected(_collect(root, "tests")) == {"test_cheap"}  # a folder is not a test named

    refused = _collect(_suite(tmp_path / "bad", MODULE))  # test_bare's marker names nothing
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR
    assert "TestGroup::test_bare: a deep test names the default tests that cover it" in refused.stderr


def test_a_module_marked_deep_as_a_whole_is_refused(tmp_path: Path) -> None:
    root = _suite(
        tmp_path, "import pytest\n\npytestmark = [pytest.mark.slow, pytest.mark.deep]\n\ndef test_a():\n    pass\n"
    )
    assert suite_errors(root, [root / "tests"]) == [
        "tests/test_m.py::pytestmark: a deep test names the default tests that cover it: "
        "@pytest.mark.deep(covered_by=('tests/...py::test_...', ...))"
    ]
    assert _collect(root).returncode == pytest.ExitCode.USAGE_ERROR


def test_every_deep_test_of_this_suite_names_default_tests_that_exist() -> None:
    from tests.tiers import deep_markers

    deep = [
        name
        for path in (ROOT / "tests").rglob("test_*.py")
        for name, covers in deep_markers(path.read_text()).items()
        if isinstance(covers, tuple)
    ]
    assert len(deep) >= 10  # the deep tier this suite has (tests/tiers.py)
    assert suite_errors(ROOT, [ROOT / "tests"]) == []
