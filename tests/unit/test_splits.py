"""all_to_allv's traffic patterns (--splits) and nccl-tests' traffic matrix files.

The expected cells are restated here from each pattern's definition (nccl-tests'
src/alltoallv.cu for spread and the matrix format), not taken from colbench.bench.ops.splits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from colbench.bench.ops import splits
from colbench.bench.ops.all_to_allv import AllToAllv
from colbench.errors import UsageError

MIB = 1 << 20


def floor16(x: float) -> int:
    return int(x // 16) * 16


def test_uniform_sends_every_peer_the_same_aligned_share() -> None:
    cells = splits.parse("uniform").cells(1000, 3)
    # 1000 / 3 = 333.3 bytes, rounded down to whole 16-byte chunks: 320.
    assert cells.tolist() == [[320] * 3] * 3


@pytest.mark.parametrize("spread", [0.0, 0.25, 1.0])
@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_spread_is_nccl_tests_generated_pattern(spread: float, n: int) -> None:
    # nccl-tests: uniform part (1-s)*T/n, distance part s*d*T/(n(n-1)/2), d = (j-i) mod n,
    # each peer's bytes rounded down to 16; T = the per-rank total (here the size).
    total = 16 * n * 4096
    cells = splits.parse(f"spread:{spread}").cells(total, n)
    for i in range(n):
        for j in range(n):
            if n == 1:
                want = floor16(total)
            else:
                d = (j - i) % n
                want = floor16((1 - spread) * total / n + spread * d * total / (n * (n - 1) // 2))
            assert cells[i][j] == want, (i, j)


def test_zipf_skews_receivers_by_a_seeded_popularity_and_keeps_senders_even() -> None:
    n, size = 4, MIB
    cells = splits.parse("zipf:1").with_seed(3).cells(size, n)
    # Every sender has the same row: weights 1, 1/2, 1/3, 1/4 in some order of receivers.
    assert all(cells[i].tolist() == cells[0].tolist() for i in range(n))
    harmonic = 1 + 1 / 2 + 1 / 3 + 1 / 4
    assert sorted(cells[0].tolist(), reverse=True) == [
        floor16(size / r / harmonic) for r in (1, 2, 3, 4)
    ]
    # Another seed makes another rank the hot one (for some seed among a few).
    hot = {int(splits.parse("zipf:1").with_seed(s).cells(size, n)[0].argmax()) for s in range(8)}
    assert len(hot) > 1
    # zipf:0 is uniform.
    assert (splits.parse("zipf:0").cells(size, n) == splits.parse("uniform").cells(size, n)).all()


def test_topk_routes_whole_tokens_at_its_natural_size() -> None:
    tokens, hidden, experts, k, n = 512, 64, 8, 2, 4
    pattern = splits.parse(f"topk:{tokens},{hidden},{experts},{k}").with_seed(1)
    token_bytes = hidden * 4  # float32
    natural = tokens * k * token_bytes
    cells = pattern.cells(natural, n)
    # Each token goes to k experts: every rank sends tokens*k tokens, in whole tokens.
    assert (cells % token_bytes == 0).all()
    assert (cells.sum(axis=1) == natural).all()
    # Random routing is uneven per receiver, and the same on every call and rank.
    assert len(set(cells.ravel().tolist())) > 1
    assert (
        pattern.cells(natural, n) == splits.parse(pattern.label).with_seed(1).cells(natural, n)
    ).all()
    assert not (splits.parse(pattern.label).with_seed(2).cells(natural, n) == cells).all()


def test_topk_needs_experts_in_equal_blocks_per_rank() -> None:
    pattern = splits.parse("topk:16,8,6,2")
    assert pattern.unsupported(3) is None
    assert "6 experts do not split evenly over 4 ranks" in (pattern.unsupported(4) or "")


def write(tmp_path: Path, text: str, name: str = "m.txt") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def matrix(tmp_path: Path, text: str, name: str = "m.txt") -> splits.Splits:
    return splits.parse("file:" + write(tmp_path, text, name))


def test_a_matrix_file_is_read_as_nccl_tests_reads_it(tmp_path: Path) -> None:
    # Rows are senders; blank lines and tabs are whitespace; cells round down to 16.
    pattern = matrix(tmp_path, "0 100\t200\n\n  50 0 70\n300 1e2 0\n")
    assert pattern.label.startswith("file:m.txt@") and len(pattern.label) == len("file:m.txt@") + 12
    # Rows sum to 300, 120 and 400: the mean row sends 820/3 bytes. At 3 times that size
    # every cell is 3 times the file's, rounded down to 16.
    assert pattern.cells(820, 3).tolist() == [[0, 288, 592], [144, 0, 208], [896, 288, 0]]
    # At the mean row's bytes (240/3), the file's own cells (already multiples of 16).
    exact = matrix(tmp_path, "0 96 48\n64 0 0\n32 0 0\n", "e.txt")
    assert exact.cells(80, 3).tolist() == [[0, 96, 48], [64, 0, 0], [32, 0, 0]]
    # Twice the size: twice every cell.
    assert exact.cells(160, 3).tolist() == [[0, 192, 96], [128, 0, 0], [64, 0, 0]]


def test_a_larger_matrix_lends_its_top_left_block(tmp_path: Path) -> None:
    pattern = matrix(tmp_path, "16 32 999\n48 64 999\n999 999 999\n")
    # The 2x2 block sends 160 bytes in all: 80 per rank.
    assert pattern.cells(80, 2).tolist() == [[16, 32], [48, 64]]
    assert pattern.unsupported(3) is None
    assert "has 3 rows, fewer than 4 ranks" in (pattern.unsupported(4) or "")


def test_an_all_zero_block_is_refused(tmp_path: Path) -> None:
    pattern = matrix(tmp_path, "0 0 5\n0 0 5\n5 5 5\n")
    assert "all zero for the first 2 ranks" in (pattern.unsupported(2) or "")


def test_the_same_file_under_two_names_compares_alike(tmp_path: Path) -> None:
    a = matrix(tmp_path, "1 2\n3 4\n", "a.txt")
    b = matrix(tmp_path, "1 2\n3 4\n", "b.txt")
    c = matrix(tmp_path, "1 2\n3 5\n", "c.txt")
    assert a.label.split("@")[1] == b.label.split("@")[1] != c.label.split("@")[1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the traffic matrix is empty"),
        ("1 2\n3\n", "row 2 has 1 values, row 1 has 2"),
        ("1 2\n3 4\n5 6\n", "must be square, got 3x2"),
        ("1 -2\n3 4\n", "line 1, value 2 is '-2'"),
        ("1 2\n3 x\n", "line 2, value 2 is 'x'"),
        ("1 nan\n3 4\n", "line 1, value 2 is 'nan'"),
        ("1 inf\n3 4\n", "line 1, value 2 is 'inf'"),
    ],
)
def test_bad_matrix_files_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as info:
        splits.parse(f"file:{path}")
    assert message in str(info.value) and path in str(info.value)
    assert "\n" not in str(info.value)


def test_a_binary_matrix_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.bin"
    path.write_bytes(b"1 2\x00\n")
    with pytest.raises(UsageError, match="binary"):
        splits.parse(f"file:{path}")


def test_the_layout_reports_the_busiest_rank_and_what_it_hides(tmp_path: Path) -> None:
    # Sent: rank 0 96+48 = 144 bytes, rank 1 64, rank 2 32 (mean 80).
    # Received: rank 0 96, rank 1 96, rank 2 48.
    op = AllToAllv(matrix(tmp_path, "0 96 48\n64 0 0\n32 0 0\n"))
    lay = op.layout(80, 4, 3)
    assert lay.size_bytes == 144  # nccl-tests: max over ranks of max(sent, received)
    assert (lay.send_numel, lay.recv_numel) == (144 // 4, 96 // 4)
    assert lay.count == 4  # the uniform pattern's per-peer elements: 80/3 B -> 16 B
    assert lay.mean_bytes == 80
    assert lay.send_imbalance == pytest.approx(144 / 80)
    assert lay.recv_imbalance == pytest.approx(96 / 80)
    # Below one 16-byte chunk per peer the size is skipped, as for all_to_all.
    assert op.layout(32, 4, 3).count == 0


def test_given_makes_a_files_path_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "1 2\n3 4\n")
    monkeypatch.chdir(tmp_path)
    assert splits.given("file:m.txt") == f"file:{tmp_path / 'm.txt'}"
    assert splits.given(" ZIPF:1.50 ") == "zipf:1.5"


def test_routing_that_would_take_minutes_is_refused_before_it_starts() -> None:
    # 2^20 tokens x 65536 experts is 6.9e10 hashes per sender: refused when parsed.
    with pytest.raises(UsageError, match=r"takes 6\.87e\+10 hashes, at most 1\.07e\+09"):
        splits.parse("topk:1048576,1,65536,1")
    # 2^30 hashes per sender is allowed alone, but not on 2 ranks (every sender is routed).
    spec = splits.parse("topk:16384,1,65536,2")
    with pytest.raises(UsageError, match=r"on 2 ranks takes 2\.15e\+09 hashes"):
        spec.cells(1024**2, 2)
