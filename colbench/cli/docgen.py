"""Reference docs generated from the code: docs/options.md from the options tables, and the
table of nccl-tests' flags in docs/nccl-tests.md (colbench.config.nccl_flags beside sweep's
table). ``make docs`` (``python -m colbench.cli.docgen``) rewrites them; a test fails while
a committed file differs from what this writes.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from colbench import text
from colbench.config.option_table import CONCERNS, Option
from colbench.config.options import table


def _default_text(opt: Option) -> str:
    if opt.default is None:
        return ""
    if isinstance(opt.default, bool):
        return "on" if opt.default else "off"
    return f"`{opt.default}`"


#: The commands whose options follow sweep's in docs/options.md, and what leads theirs.
COMMAND_LEADS = {
    "p2p": "Its own ([p2p.md](p2p.md)):",
    "health": "Its own ([health.md](health.md)):",
    "gate": "`colbench gate BASELINE [CURRENT...]` ([gate.md](gate.md)):",
    "predict": "`colbench predict RUN [RUN...]` ([predict.md](predict.md)):",
}


def options_markdown() -> str:
    """docs/options.md: the option reference, grouped by concern."""
    lines = [
        "# Options of `colbench sweep`",
        "",
        "<!-- Generated from colbench/config/options.py by `make docs`; do not edit. -->",
        "",
        "The same options work as flags (`colbench sweep`, `colbench run FILE`, "
        "`colbench crosscheck`) and as keys of a YAML suite (`colbench run FILE`, "
        "`colbench sweep --config FILE`); flags given with a file override its values. "
        "Sizes are binary (1K = 1024 bytes); bandwidth is GB/s (1 GB/s = 1e9 bytes/s).",
    ]
    rows = table()
    for concern, title in CONCERNS.items():
        lines += ["", f"## {title}", ""]
        lines += text.markdown(
            ["Flag", "Aliases", "nccl-tests", "YAML key", "Default", "Meaning"],
            [
                (
                    f"`{opt.spec.flags[0]}`",
                    " ".join(f"`{f}`" for f in opt.spec.flags[1:]),
                    f"`{opt.spec.nccl_tests}`" if opt.spec.nccl_tests else "",
                    ", ".join(f"`{k}`" for k in opt.yaml_keys),
                    _default_text(opt),
                    text.escape(opt.spec.help),
                )
                for opt in rows
                if opt.spec.concern == concern
            ],
        )
    for command, lead in COMMAND_LEADS.items():
        table_of = importlib.import_module(f"colbench.commands.{command}.options")
        own = getattr(table_of, "own", table_of.table)
        lines += _command_lines(command, table_of.table(), own(), lead)
    return "\n".join(lines) + "\n"


def _command_lines(
    command: str, every: tuple[Option, ...], own: tuple[Option, ...], lead: str
) -> list[str]:
    """A command's section: the sweep options it takes by name (those of ``every`` not in
    ``own``), if any, then its own options' flag, default and meaning."""
    shared = [f"`{o.spec.flags[0]}`" for o in every if o not in own]
    if shared:
        lead = (
            f"`colbench {command}` takes these options of sweep as they are (above): "
            f"{', '.join(shared)}. {lead}"
        )
    return [
        "",
        f"# Options of `colbench {command}`",
        "",
        f"<!-- Generated from colbench/commands/{command}/options.py by `make docs`; "
        "do not edit. -->",
        "",
        lead,
        "",
        *text.markdown(
            ["Flag", "Default", "Meaning"],
            [(f"`{o.spec.flags[0]}`", _default_text(o), text.escape(o.spec.help)) for o in own],
        ),
    ]


#: The generated part of docs/nccl-tests.md lies between these lines.
NCCL_TESTS_BEGIN = (
    "<!-- nccl-tests flags: generated from colbench/config/options.py and "
    "colbench/config/nccl_flags.py by `make docs`; do not edit. -->"
)
NCCL_TESTS_END = "<!-- end of the generated nccl-tests flags -->"


def nccl_tests_markdown() -> str:
    """The table of every nccl-tests flag: its meaning and default there, and what colbench
    does with it (the option that takes it, or the refusal and its reason)."""
    from colbench.config.nccl_flags import FLAGS, REFUSED, VERSION

    taken = {opt.spec.nccl_tests: opt for opt in table() if opt.spec.nccl_tests.startswith("-")}
    refused = {r.short: r for r in REFUSED}
    lines = [
        NCCL_TESTS_BEGIN,
        "",
        f"Every option of nccl-tests {VERSION} (`src/common.cu`), and what `colbench sweep` "
        "does with it. A taken flag means what it means there; a refused one is answered "
        "with its reason and exit code 2, except for the values that ask for what colbench "
        "does anyway (`-g 1`), which pass.",
        "",
    ]
    cells = []
    for flag in FLAGS:
        name = f"`{flag.short}`, `{flag.long}`"
        if flag.short in taken:
            opt = taken[flag.short]
            flags = ", ".join(f"`{f}`" for f in opt.spec.flags)
            default = "" if opt.default is None else f" Default here: `{opt.default}`."
            said = f"taken: {flags}. {opt.spec.help}{default}"
            if flag.long not in opt.spec.flags:
                said += f" (`{flag.long}` is colbench's own `--op`: the collective.)"
        elif flag.short in refused:
            r = refused[flag.short]
            same = f" Taken when it is {', '.join(f'`{v}`' for v in r.same)}." if r.same else ""
            said = f"refused: {r.reason}.{same}"
        else:  # -h: every other flag is taken or refused (a unit test holds it)
            said = "taken: `-h`, `--help`."
        cells.append((name, *map(text.escape, (flag.meaning, flag.default, said))))
    lines += text.markdown(["nccl-tests", "meaning there", "default there", "colbench"], cells)
    lines += ["", NCCL_TESTS_END]
    return "\n".join(lines)


DOCS = Path(__file__).resolve().parents[2] / "docs" / "options.md"
NCCL_TESTS_DOC = DOCS.with_name("nccl-tests.md")


def with_nccl_tests_table(doc: str) -> str:
    """docs/nccl-tests.md's text with its generated table replaced by the current one."""
    head, begin, rest = doc.partition(NCCL_TESTS_BEGIN)
    _, end, tail = rest.partition(NCCL_TESTS_END)
    if not begin or not end:
        raise ValueError(f"{NCCL_TESTS_DOC} lacks the generated table's marker lines")
    return head + nccl_tests_markdown() + tail


def main(argv: list[str]) -> int:
    """Write docs/options.md (or the path given) and, without a path, the table of
    nccl-tests' flags in docs/nccl-tests.md."""
    path = Path(argv[0]) if argv else DOCS
    path.write_text(options_markdown(), encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
    if not argv:
        doc = NCCL_TESTS_DOC.read_text(encoding="utf-8")
        NCCL_TESTS_DOC.write_text(with_nccl_tests_table(doc), encoding="utf-8")
        print(f"wrote the nccl-tests flags in {NCCL_TESTS_DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
