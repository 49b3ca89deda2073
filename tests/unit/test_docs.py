"""The docs hold what they promise (sqlite-utils' test_docs idea): every command shows an
example in its help and is documented, every example command in the README and docs/ is a
real invocation, every link resolves. tests/dist/test_docs_examples.py runs the examples
that run on a CPU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from colbench.cli import main
from colbench.cli.app import app
from tests.docs_examples import (
    LANGUAGES,
    REPO,
    all_blocks,
    anchors,
    colbench_args,
    console_examples,
    doc_files,
    links,
    shape_mismatch,
    shell_commands,
    where,
)

#: Every command the CLI registers, so that a new one cannot go undocumented; `version`
#: takes no argument worth an example.
COMMANDS = [
    name
    for name in (
        c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands
    )
    if name != "version"
]
README = REPO / "README.md"
DOCS = REPO / "docs"
README_MAX_LINES = 200


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert "Example" in out and f"colbench {command}" in out


def _all_docs_text() -> str:
    return "\n".join(path.read_text() for path in doc_files())


@pytest.mark.parametrize("command", [*COMMANDS, "import nccl-tests", "version"])
def test_docs_document_the_command(command: str) -> None:
    text = _all_docs_text()
    assert f"colbench {command} " in text or f"colbench {command}`" in text


def test_readme_is_short_and_shows_the_three_uses() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    for use in ("$ colbench sweep ", "--env NCCL_ALGO=Ring,Tree", "$ colbench gate "):
        assert use in text


def test_every_code_block_says_what_it_holds() -> None:
    unmarked = [where(b.path, b.line - 1) for b in all_blocks() if b.language not in LANGUAGES]
    assert not unmarked, f"code blocks need one of the languages {LANGUAGES}: {unmarked}"


def _command_lines() -> list[tuple[str, list[str]]]:
    """Every command line of the docs' sh and console blocks, as words, with where it is."""
    found = []
    for block in all_blocks():
        if block.language == "console":
            found += [(where(e.path, e.line), list(e.argv)) for e in console_examples(block)]
        elif block.language == "sh":
            found += [(where(block.path, line), words) for line, words in shell_commands(block)]
    return found


def _invocations() -> list[tuple[str, list[str]]]:
    """Every colbench command in the docs' console and sh blocks, with where it is."""
    return [
        (place, args)
        for place, words in _command_lines()
        if (args := colbench_args(words)) is not None
    ]


def test_the_docs_have_examples_of_both_kinds() -> None:
    # Guards the parser: a fence typo would silently leave nothing to check.
    languages = [block.language for block in all_blocks()]
    assert languages.count("console") >= 2 and languages.count("sh") >= 8
    assert len(_invocations()) >= 30


@pytest.mark.parametrize(("place", "args"), _invocations(), ids=lambda v: str(v)[:60])
def test_example_is_a_real_invocation(
    place: str, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # --help is handled once every word is parsed: an unknown command or flag, or a flag
    # missing its value, is still a usage error, but nothing runs.
    with pytest.raises(SystemExit) as info:
        main([*args, "--help"])
    assert info.value.code == 0, f"{place}: colbench {' '.join(args)}: {capsys.readouterr().err}"


def test_example_outputs_go_under_the_ignored_results_folder() -> None:
    # A reader who pastes an example from the repository's root must not be left with an
    # untracked folder (`--out ab`): results/ is what .gitignore ignores.
    assert "results/*" in (REPO / ".gitignore").read_text().splitlines()
    outs = []
    for place, args in _invocations():
        for index, word in enumerate(args):
            if word == "--out" and index + 1 < len(args):
                outs.append((place, args[index + 1]))
            elif word.startswith("--out="):
                outs.append((place, word.removeprefix("--out=")))
    assert len(outs) >= 10
    for place, out in outs:
        assert out.startswith(("results/", "/", "$")), f"{place}: --out {out} is outside results/"


def test_console_examples_run_on_a_cpu() -> None:
    for block in all_blocks():
        if block.language != "console":
            continue
        for example in console_examples(block):
            place = where(example.path, example.line)
            assert example.argv[0] == "colbench", f"{place}: console blocks run colbench only"
            if example.argv[1] in ("sweep", "run"):
                assert "--backend" in example.argv and "gloo" in example.argv, (
                    f"{place}: a sweep in a console block must say --backend gloo"
                )


def _make_targets() -> set[str]:
    makefile = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([\w.-]+):", makefile, flags=re.MULTILINE))


def test_make_commands_name_real_targets() -> None:
    targets = _make_targets()
    for place, words in _command_lines():
        if words[0] == "make":
            named = {w for w in words[1:] if "=" not in w and not w.startswith("-")}
            assert named <= targets, f"{place}: no make target {named - targets}"


def test_repo_files_named_in_commands_exist() -> None:
    named = [
        (place, word)
        for place, words in _command_lines()
        for word in words
        if re.match(r"(benchmarks|configs|tests)/\S+$", word)
    ]
    assert len(named) >= 2
    for place, word in named:
        assert (REPO / word).exists(), f"{place}: no {word}"


def _resolve(page: Path, target: str) -> tuple[Path, str]:
    file_part, _, anchor = target.partition("#")
    return ((page.parent / file_part).resolve() if file_part else page), anchor


def test_links_between_readme_and_docs_resolve() -> None:
    broken = []
    for page in doc_files():
        for line, target in links(page):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto: are not ours to check
            path, anchor = _resolve(page, target)
            if not path.exists():
                broken.append(f"{where(page, line)}: {target} (no such file)")
            elif anchor and anchor not in anchors(path):
                broken.append(f"{where(page, line)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_index_lists_every_page() -> None:
    index = DOCS / "index.md"
    listed = {_resolve(index, target)[0] for _, target in links(index)}
    pages = set(DOCS.glob("*.md")) - {index}
    assert pages <= listed
    assert index in {_resolve(README, target)[0] for _, target in links(README)}


# The matcher the runnable examples are judged by must be able to fail.
TABLE = ("# all_reduce", "        1024           256     float     sum      -1    921.1    0.00")


def test_shape_ignores_numbers_spacing_and_host() -> None:
    printed = ["# all_reduce", "    1024   256  float  sum  -1  13.5  1.2e+06"]
    assert shape_mismatch(TABLE, printed) is None
    rank = ("#  Rank   0 Pid    4067 on           vm device cpu",)
    assert shape_mismatch(rank, ["#  Rank   1 Pid 99 on node-7.example device cpu"]) is None


def test_shape_takes_an_infinite_rate_for_a_number_but_not_words_starting_with_inf() -> None:
    fitted = ("  all_gather  ring  0.0  474.83  0.6476  -  63.3%",)
    assert shape_mismatch(fitted, ["  all_gather  ring  0.0  770.95  inf  -  54.0%"]) is None
    assert shape_mismatch(fitted, ["  all_gather  ring  0.0  770.95  info  -  54.0%"]) is not None


def test_shape_catches_a_changed_column_or_word() -> None:
    assert shape_mismatch(TABLE, ["# all_reduce", "1024 256 float sum -1 921.1"]) is not None
    assert shape_mismatch(TABLE, ["# all_gather", TABLE[1]]) is not None
    assert shape_mismatch(TABLE, list(TABLE[:1])) is not None
    assert shape_mismatch(TABLE, [*TABLE, "one line more"]) is not None


def test_shape_ellipsis_stands_for_lines_and_line_ends() -> None:
    shown = ("# head", "...", "colbench gate: PASS: 7 rows: ...")
    assert shape_mismatch(shown, ["# head", "colbench gate: PASS: 7 rows: 6 ok"]) is None
    printed = ["# head", "a", "b", "colbench gate: PASS: 7 rows: 1 noisy, 6 ok"]
    assert shape_mismatch(shown, printed) is None
    assert shape_mismatch(shown, ["# head", "colbench gate: FAIL (1 failure(s)): 7"]) is not None


def test_commands_page_names_every_suite_key() -> None:
    """docs/commands.md lists a suite's keys by hand: each key the schema takes is there
    (``repeat`` was once left out)."""
    from colbench.config import suite

    text = (DOCS / "commands.md").read_text()
    section = text.split("## Suites", 1)[1].split("```", 1)[0]
    named = set(re.findall(r"`(\w+)`", section))
    assert sorted(set(suite.SCHEMA) - named) == []
