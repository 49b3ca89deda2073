"""``colbench explain-log``: every real log (tests/data) through the command, as its INDEX.md
truth table says (the reader's own tests are test_nccl_log.py), the text form, and bad
input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_main
from tests.unit.test_nccl_log import LOGS, SOCKET_FALLBACK, TRUTH


def _same(got: dict[str, object], truth: dict[str, object], name: str) -> None:
    assert next(iter(got)) == "path" and got["path"] == str(LOGS / name)
    got = {k: v for k, v in got.items() if k != "path"}
    assert sorted(got["transports"]) == sorted(truth["transports"])  # type: ignore[arg-type]
    assert {k: v for k, v in got.items() if k != "transports"} == {
        k: v for k, v in truth.items() if k != "transports"
    }


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_json_of_one_log_is_its_truth_table(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "explain-log", str(LOGS / name), "--json")
    assert (code, err) == (0, "")
    _same(json.loads(out), TRUTH[name], name)


def test_json_of_several_logs_is_a_list_each_with_its_path(
    capsys: pytest.CaptureFixture[str],
) -> None:
    names = sorted(TRUTH, reverse=True)
    code, out, _ = run_main(capsys, "explain-log", *(str(LOGS / n) for n in names), "--json")
    data = json.loads(out)
    assert code == 0 and isinstance(data, list) and len(data) == len(names)
    for got, name in zip(data, names, strict=True):
        _same(got, TRUTH[name], name)


def test_the_text_names_the_fallbacks_and_is_quiet_elsewhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_main(capsys, "explain-log", *(str(LOGS / n) for n in sorted(TRUTH)))
    assert code == 0
    blocks = out.strip().split("\n\n")
    assert len(blocks) == len(TRUTH)
    for block, name in zip(blocks, sorted(TRUTH), strict=True):
        lines = block.splitlines()
        assert lines[0] == str(LOGS / name)
        verdicts = [line.split("verdict", 1)[1].strip() for line in lines if "  verdict " in line]
        assert verdicts == (TRUTH[name]["verdicts"] or ["none: all the log shows is as expected"])
    socket = SOCKET_FALLBACK.format("network plugin NET/OFI failed to initialize")
    assert "network     Socket (a fallback)" in out and socket in out
    # rccl1026's sockets run over Slingshot (hsn0) with no plugin found: a fallback, as
    # INDEX.md says; its text names no GDR, which sockets do not have.
    rccl = blocks[sorted(TRUTH).index("rccl1026-mi250x-2node-socket-abort-rccl2.16.log")]
    assert "  network     Socket (a fallback)\n" in rccl + "\n" and "  GDR " not in rccl


def test_the_text_says_the_network_of_the_transport_lines_and_no_gdr_for_sockets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """nccl1781 prints no 'Using network' line but NET/Socket transports: the text says
    Socket from them, and leaves out GDR, which sockets do not have."""
    _, out, _ = run_main(capsys, "explain-log", str(LOGS / "nccl1781-k8s-pods-nohostid-socket.log"))
    assert "  network     Socket (from the transport lines; no 'Using network' line)\n" in out
    assert "  transports  NET/Socket\n" in out and "GDR" not in out
    name = "awsefaeks-p4d-efa-2.9.log"
    _, out, _ = run_main(capsys, "explain-log", str(LOGS / name))
    assert "  GDR         on\n" in out


def test_the_text_of_an_rccl_version_block(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.datadir import NCCL_TESTS_LOGS

    log = NCCL_TESTS_LOGS / "alltoall__rccl-mi355x-2node-alibaba.log"
    code, out, _ = run_main(capsys, "explain-log", str(log))
    assert code == 0 and "  NCCL        RCCL 2.27.7\n" in out
    _, out, _ = run_main(capsys, "explain-log", str(log), "--json")
    assert json.loads(out)["nccl_version"] == "RCCL 2.27.7"


def test_the_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "explain-log", "--help")
    assert code == 0 and "Exit codes: 0 explained" in out and "2 a log unreadable" in out


def test_the_text_of_a_tuning_log_groups_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    name = "ncclebpf-rtx5090-hostid-2ranks-1gpu-tuning-2.29.log"
    _, out, _ = run_main(capsys, "explain-log", str(LOGS / name))
    assert "  algorithms  broadcast 1K..16K bytes: Ring LL\n" in out
    assert "  algorithms  broadcast 32K..128M bytes: Ring Simple\n" in out
    assert "  ranks       2 ranks, 1 node, ? channels\n" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read NCCL log"),
        ("size,time_us\n8,1.0\n", "holds no NCCL INFO or WARN line"),
        ("\x00\x01binary", "holds binary data"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    content: str | None, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.log"
    if content is not None:
        path.write_text(content)
    code, out, err = run_main(capsys, "explain-log", str(LOGS / sorted(TRUTH)[0]), str(path))
    assert code == 2 and out == ""
    assert err.startswith("colbench: error: ") and message in err and err.count("\n") == 1


def test_the_example_in_explain_md_is_what_the_command_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.docs_examples import REPO, blocks

    (shown,) = [
        b for b in blocks(REPO / "docs" / "explain.md") if b.language == "text" and b.lines
    ][:1]
    name = shown.lines[0]
    _, out, _ = run_main(capsys, "explain-log", str(LOGS / name))
    assert out.splitlines() == [str(LOGS / name), *shown.lines[1:]]
