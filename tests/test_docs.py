"""The documentation a newcomer reads first stays true to the code.

- The README is a front door: at most 150 lines, and its two commands are the ones CI runs (`.ci/run`: the
  same install, the same test command).
- Every relative link in the README and the pages under ``docs/`` points to a file that exists (and, with
  ``#anchor``, to a heading of that file).
- Every `harvest` command the README and its pages show (``bash`` blocks and inline code) names a real
  subcommand, and every ``--option`` it passes is one that subcommand takes.

docs/CHAIN.md's walkthrough is also run, command for command, by tests/e2e/test_chain.py (deep tier).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_MAX_LINES = 150
#: The README and the pages it sends readers to for the commands it no longer holds.
COMMAND_PAGES = (
    README,
    *(
        ROOT / "docs" / name
        for name in ("CHAIN.md", "COMMANDS.md", "EXPERIMENT.md", "LAYOUT.md", "SPIDER2.md", "TESTING.md")
    ),
    ROOT / "docs" / "corpus" / "REBUILD.md",
)
#: Every markdown page whose relative links are checked: the README, SECURITY.md and everything under docs/.
LINKED_PAGES = (README, ROOT / "SECURITY.md", *sorted((ROOT / "docs").rglob("*.md")))

FENCE = re.compile(r"^```(\w*)\s*$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`[^`\n]*`")
INLINE_HARVEST = re.compile(r"`(harvest [^`\n]+)`")
#: Shell operators that end one command and start the next (``&&``, ``||``, ``;``, a pipe).
SHELL_SEPARATOR = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")


def shown_path(page: Path) -> str:
    """A page's path as a failure message names it: relative to the repository when it is in it."""
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


@dataclass(frozen=True)
class DocCommand:
    """One `harvest` command shown on a page: where it is and its arguments after ``harvest``."""

    page: Path
    line: int
    args: tuple[str, ...]

    def where(self) -> str:
        """``page:line``, for a failure message."""
        return f"{shown_path(self.page)}:{self.line}"


@dataclass(frozen=True)
class DocLink:
    """One markdown link on a page: where it is and its target as written."""

    page: Path
    line: int
    target: str


def fenced_blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """Each fenced code block of a markdown text: its language, the line number of its first line, its lines."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        yield opened.group(1), i + 2, lines[i + 1 : end]
        i = end + 1


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """Each line of a markdown text outside fenced code blocks, with its line number."""
    inside = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            inside = not inside
        elif not inside:
            yield number, line


def harvest_args(command_line: str) -> list[tuple[str, ...]]:
    """The argument lists after ``harvest`` of each command in one shell line (comments dropped)."""
    found = []
    for part in SHELL_SEPARATOR.split(command_line.split("#", 1)[0]):
        words = part.split()
        if "harvest" in words:
            found.append(tuple(words[words.index("harvest") + 1 :]))
    return found


def bash_commands(page: Path) -> Iterator[DocCommand]:
    """The `harvest` commands of a page's ``bash`` blocks; a line ending in ``\\`` continues on the next."""
    for language, first, lines in fenced_blocks(page.read_text(encoding="utf-8")):
        if language != "bash":
            continue
        pending, start = "", first
        for offset, line in enumerate(lines):
            if not pending:
                start = first + offset
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            for args in harvest_args(pending + line):
                yield DocCommand(page, start, args)
            pending = ""


def inline_commands(page: Path) -> Iterator[DocCommand]:
    """The `harvest` commands a page shows in inline code (`` `harvest add ... --rebuild` ``) outside blocks."""
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        for span in INLINE_HARVEST.findall(line):
            for args in harvest_args(span):
                yield DocCommand(page, number, args)


def links(page: Path) -> Iterator[DocLink]:
    """The markdown links of a page's prose (links inside code are text, not links)."""
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            yield DocLink(page, number, target)


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    for _, line in prose_lines(page.read_text(encoding="utf-8")):
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def link_problem(link: DocLink) -> str | None:
    """Why a relative link is broken (its file or its heading is missing), or None when it is sound."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", link.target):  # https:, mailto: ... are not ours to check
        return None
    path_part, _, anchor = link.target.partition("#")
    target = (link.page.parent / path_part).resolve() if path_part else link.page
    if not target.exists():
        return f"{shown_path(link.page)}:{link.line}: {link.target} -> no such file"
    if anchor and target.suffix == ".md" and anchor not in heading_anchors(target):
        return f"{shown_path(link.page)}:{link.line}: {link.target} -> no heading #{anchor}"
    return None


def resolve(args: tuple[str, ...]) -> tuple[click.Command, list[str], list[str]]:
    """The click command a `harvest` argument list runs, the subcommand words that led there, and the rest."""
    from dbt_harvest.cli import main

    ctx = click.Context(main, info_name="harvest")
    command: click.Command = main
    path: list[str] = []
    rest = [arg.strip("[]") for arg in args]
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(ctx, rest[0])
        if sub is None:
            break
        command = sub
        path.append(rest.pop(0))
    return command, path, rest


def command_problem(shown: DocCommand) -> str | None:
    """Why a shown command would not parse (an unknown subcommand or option), or None when it names real ones."""
    command, path, rest = resolve(shown.args)
    spelled = " ".join(["harvest", *shown.args])
    if not path:
        return f"{shown.where()}: {spelled} -> no such subcommand"
    takes_arguments = any(isinstance(param, click.Argument) for param in command.params)
    if isinstance(command, click.Group) and rest and not rest[0].startswith("-") and not takes_arguments:
        return f"{shown.where()}: {spelled} -> harvest {' '.join(path)} has no subcommand {rest[0]!r}"
    options = {"--help"} | {name for param in command.params for name in (*param.opts, *param.secondary_opts)}
    unknown = [arg for arg in rest if arg.startswith("--") and arg.split("=", 1)[0] not in options]
    if unknown:
        return f"{shown.where()}: {spelled} -> harvest {' '.join(path)} takes no {', '.join(unknown)}"
    return None


def readme_bash_lines() -> list[str]:
    """Every line of the README's ``bash`` blocks."""
    return [
        line
        for language, _, lines in fenced_blocks(README.read_text(encoding="utf-8"))
        if language == "bash"
        for line in lines
    ]


def ci_line(prefix: str) -> str:
    """The first line of .ci/run that starts with ``prefix`` (the commands CI runs, as it spells them)."""
    return next(
        line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines() if line.startswith(prefix)
    )


def test_the_readme_is_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {README_MAX_LINES}: move the detail to a page under docs/"
    )


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    """.ci/run says it runs "the README's test command": its first pytest line is one of the README's."""
    assert ci_line("python -m pytest") in readme_bash_lines()


def test_the_readme_install_is_the_one_ci_makes() -> None:
    """The README's first command installs what .ci/run installs (the torch pin, the extras), then runs the demo."""
    first = readme_bash_lines()[0]
    assert first.endswith("&& harvest demo")
    extras = shlex.split(ci_line("python -m pip install -q -e"))[-1]
    torch = shlex.split(ci_line("python -m pip install -q torch=="))[-1]
    assert f"pip install -e '{extras}'" in first and f"pip install {torch}" in first


def test_the_pages_show_harvest_commands() -> None:
    """The extraction below finds the commands it checks (a page format change cannot empty the check)."""
    assert len(list(bash_commands(README))) >= 11  # the demo and the ten-line tour
    assert [page.name for page in COMMAND_PAGES if not list(bash_commands(page))] == ["LAYOUT.md", "TESTING.md"]


@pytest.mark.parametrize("page", COMMAND_PAGES, ids=shown_path)
def test_every_harvest_command_shown_names_a_real_subcommand_and_options(page: Path) -> None:
    shown = [*bash_commands(page), *inline_commands(page)]
    assert [problem for command in shown if (problem := command_problem(command))] == []


@pytest.mark.parametrize("page", LINKED_PAGES, ids=shown_path)
def test_every_relative_link_points_to_a_file_that_exists(page: Path) -> None:
    assert [problem for link in links(page) if (problem := link_problem(link))] == []


def test_a_broken_link_and_an_unknown_option_are_named(tmp_path: Path) -> None:
    """The checks fail where they should: a missing file, a missing heading, an unknown option or subcommand."""
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[a](missing.md) [b](page.md#nowhere) [c](page.md#title) [d](https://x.invalid/y)\n")
    problems = [link_problem(link) for link in links(page)]
    assert [p is not None for p in problems] == [True, True, False, False]
    assert "no such file" in str(problems[0]) and "no heading #nowhere" in str(problems[1])
    assert command_problem(DocCommand(README, 1, ("lint", "--no-such-option"))) is not None
    assert command_problem(DocCommand(README, 1, ("no-such-subcommand",))) is not None
    assert command_problem(DocCommand(README, 1, ("mint", "--all", "--jobs", "2"))) is None
