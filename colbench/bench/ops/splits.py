"""Who sends how many bytes to whom in an ``all_to_allv``: ``--splits``.

A split spec names a matrix of weights (row i the sender, column j the receiver)
normalised so that the mean row sums to 1 (``GENERATORS``). At requested size S every cell
is w_ij * S bytes, rounded down to a whole 16-byte chunk (as nccl-tests aligns a peer's
bytes), so S is what the mean rank sends. Generators are deterministic in (spec, ranks,
--seed), by integer hashing rather than a library's random stream, so every rank and
machine computes the same matrix. numpy is imported inside the functions that use it:
the registry and ``--help`` load without it.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from colbench.errors import UsageError
from colbench.output import plural
from colbench.reading import Kind, read_text

if TYPE_CHECKING:
    import numpy as np

#: nccl-tests rounds every peer's bytes down to this.
ALIGN_BYTES = 16
#: A traffic matrix as nccl-tests reads one: a 1024-rank matrix of 12-digit cells is 13 MB.
MATRIX = Kind("traffic matrix", 256 * 1024**2)
#: Tokens a topk spec may route per rank: enough for any MoE layer.
MAX_TOKENS = 1 << 20
#: The routing hashes every (token, expert) of every sender, in the parent and again in
#: every rank: 16M hashes took 0.23 s here, so 2^30 (about 15 s) is the most a spec may
#: ask for at the run's world size (TOKENS x EXPERTS x ranks).
MAX_ROUTING_HASHES = 1 << 30
GENERATORS = ("uniform", "spread:S", "zipf:ALPHA", "topk:TOKENS,HIDDEN,EXPERTS,K", "file:PATH")


@dataclass(frozen=True)
class Splits:
    """A parsed ``--splits`` spec and the seed of its generator."""

    label: str
    """The spec in canonical form: the rows' ``splits`` column (a file: its name and the
    first 12 hex digits of its SHA-256, so two copies of one file compare alike)."""
    kind: str
    params: tuple[float, ...] = ()
    seed: int = 0
    matrix: tuple[tuple[float, ...], ...] | None = field(default=None, compare=False, repr=False)
    """A file's cells in bytes, rows = senders (compared through ``label``'s hash)."""

    def with_seed(self, seed: int) -> Splits:
        return Splits(self.label, self.kind, self.params, seed, self.matrix)

    def unsupported(self, world_size: int) -> str | None:
        """Why this pattern has no matrix for ``world_size`` ranks, or None."""
        if self.kind == "file":
            assert self.matrix is not None
            dim = len(self.matrix)
            if dim < world_size:
                return (
                    f"the traffic matrix {self.label} has {plural(dim, 'row')}, "
                    f"fewer than {world_size} ranks"
                )
            if not any(any(row[:world_size]) for row in self.matrix[:world_size]):
                return (
                    f"the traffic matrix {self.label} is all zero for the first {world_size} ranks"
                )
        experts = int(self.params[2]) if self.kind == "topk" else 0
        if experts % world_size:
            return f"{self.label}: {experts} experts do not split evenly over {world_size} ranks"
        return None

    def cells(self, requested_bytes: int, world_size: int) -> np.ndarray:
        """Bytes rank i sends rank j at this size (int64, every cell a multiple of 16)."""
        return _cells(self, requested_bytes, world_size)


def parse(spec: str) -> Splits:
    """``--splits`` text -> Splits (a one-line UsageError when it is not one)."""
    text = spec.strip()
    name, sep, rest = text.partition(":")
    name = name.lower()
    if name == "uniform" and not sep:
        return Splits("uniform", "uniform")
    if name == "spread" and sep:
        (s,) = _numbers(text, rest, 1)
        if not 0 <= s <= 1:
            raise UsageError(f"bad --splits {text!r}: spread takes 0 to 1 (nccl-tests' spread)")
        return Splits(f"spread:{s:g}", "spread", (s,))
    if name == "zipf" and sep:
        (alpha,) = _numbers(text, rest, 1)
        if not 0 <= alpha <= 100:
            raise UsageError(f"bad --splits {text!r}: zipf takes an exponent from 0 to 100")
        return Splits(f"zipf:{alpha:g}", "zipf", (alpha,))
    if name == "topk" and sep:
        return _topk(text, rest)
    if name == "file" and sep:
        return read_matrix(rest)
    raise UsageError(
        f"bad --splits {text!r}: use {', '.join(GENERATORS)} (see colbench explain all_to_allv)"
    )


def given(spec: str) -> str:
    """``--splits`` as the ranks are to read it: checked here (a bad spec or file fails
    before any rank starts), a file's path made absolute."""
    pattern = parse(spec)
    if pattern.kind == "file":
        return "file:" + os.path.abspath(spec.strip().partition(":")[2])
    return pattern.label


def _numbers(text: str, rest: str, count: int) -> list[float]:
    parts = [p.strip() for p in rest.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != count or not all(math.isfinite(v) for v in values):
        raise UsageError(f"bad --splits {text!r}: expected {count} number(s) after the colon")
    return values


def _topk(text: str, rest: str) -> Splits:
    values = _numbers(text, rest, 4)
    if not all(v == int(v) and v >= 1 for v in values):
        raise UsageError(
            f"bad --splits {text!r}: TOKENS, HIDDEN, EXPERTS and K are whole numbers of 1 or more"
        )
    tokens, hidden, experts, k = (int(v) for v in values)
    if k > experts:
        raise UsageError(f"bad --splits {text!r}: K={k} exceeds the {experts} experts")
    if tokens > MAX_TOKENS or experts > 65536 or hidden > 2**31 - 1:
        raise UsageError(
            f"bad --splits {text!r}: at most {MAX_TOKENS} tokens per rank, 65536 experts in "
            f"all and a hidden size of {2**31 - 1}"
        )
    if tokens * experts > MAX_ROUTING_HASHES:
        raise UsageError(_too_much_routing(text, tokens * experts))
    return Splits(f"topk:{tokens},{hidden},{experts},{k}", "topk", (tokens, hidden, experts, k))


def read_matrix(path: str) -> Splits:
    """A traffic matrix file as nccl-tests' alltoallv reads one.

    Whitespace-separated numbers of bytes, one row per sender: cell [i][j] is what rank i
    sends rank j. Non-negative, square, as many columns on every row; blank lines are
    skipped. A larger matrix than the ranks is allowed: its top-left block is used.
    """
    if not path:
        raise UsageError("bad --splits 'file:': give the traffic matrix's path after 'file:'")
    text = read_text(path, MATRIX)
    rows: list[tuple[float, ...]] = []
    for line_no, line in enumerate(text.splitlines(), 1):
        if line.strip():
            rows.append(
                tuple(_cell(path, line_no, col, word) for col, word in enumerate(line.split(), 1))
            )
    if not rows:
        raise UsageError(f"{path}: the traffic matrix is empty")
    width = len(rows[0])
    for number, row in enumerate(rows, 1):
        if len(row) != width:
            raise UsageError(f"{path}: row {number} has {len(row)} values, row 1 has {width}")
    if len(rows) != width:
        raise UsageError(f"{path}: the traffic matrix must be square, got {len(rows)}x{width}")
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return Splits(f"file:{os.path.basename(path)}@{digest}", "file", (), 0, tuple(rows))


def _cell(path: str, line_no: int, col: int, word: str) -> float:
    try:
        value = float(word)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UsageError(
            f"{path}: line {line_no}, value {col} is {word!r}: cells are bytes (0 or more)"
        )
    return value


@functools.lru_cache(maxsize=8)
def _cells(splits: Splits, requested_bytes: int, world_size: int) -> np.ndarray:
    import numpy as np

    n = world_size
    if splits.kind == "spread":
        # nccl-tests' formula, in its own order of operations, so that at sizes where its
        # per-rank total equals ours (multiples of 16 * n) its cells are reproduced exactly.
        x = _spread_bytes(splits.params[0], n, requested_bytes)
    else:
        weights, per_row = _weights(splits, n)
        x = weights * float(requested_bytes) / per_row
    cells = np.floor(x / ALIGN_BYTES).astype(np.int64) * ALIGN_BYTES
    cells.flags.writeable = False
    return cells


def _spread_bytes(spread: float, n: int, total: int) -> np.ndarray:
    import numpy as np

    if n == 1:
        return np.full((1, 1), float(total))
    ranks = np.arange(n)
    distance = (ranks[None, :] - ranks[:, None]) % n
    uniform = total / n
    weighted = distance * float(total) / (n * (n - 1) // 2)
    return (1.0 - spread) * uniform + spread * weighted


@functools.lru_cache(maxsize=8)
def _weights(splits: Splits, n: int) -> tuple[np.ndarray, float]:
    """(weights, the mean row's sum): cells are weights * S / that sum."""
    import numpy as np

    if splits.kind == "uniform":
        weights = np.ones((n, n))
    elif splits.kind == "zipf":
        weights = _zipf(splits.params[0], n, splits.seed)
    elif splits.kind == "topk":
        tokens, _, experts, k = (int(v) for v in splits.params)
        if tokens * experts * n > MAX_ROUTING_HASHES:
            raise UsageError(_too_much_routing(splits.label, tokens * experts * n, n))
        weights = _topk_counts(tokens, experts, k, n, splits.seed).astype(np.float64)
    else:
        assert splits.matrix is not None
        weights = np.array([row[:n] for row in splits.matrix[:n]], dtype=np.float64)
    return weights, float(weights.sum()) / n


def _hash(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 (wraps alike everywhere): a seeded, portable
    stand-in for a random stream."""
    import numpy as np

    x = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _zipf(alpha: float, n: int, seed: int) -> np.ndarray:
    """Every sender weights the receiver of popularity rank r by 1/r^alpha; which rank is
    most popular is a seeded permutation. Senders stay balanced, receivers do not: the
    hot expert's rank receives the most (a skewed MoE dispatch)."""
    import numpy as np

    offset = np.uint64(seed * (n + 1) % 2**64)
    order = np.argsort(_hash(np.arange(n, dtype=np.uint64) + offset), kind="stable")
    popularity = np.empty(n, dtype=np.int64)
    popularity[order] = np.arange(1, n + 1)
    row = 1.0 / popularity.astype(np.float64) ** alpha
    return np.tile(row, (n, 1))


def _topk_counts(tokens: int, experts: int, k: int, n: int, seed: int) -> np.ndarray:
    """(token, expert) pairs rank i routes to rank j: every token of every rank picks k
    distinct experts uniformly (the k smallest of a hash per expert), and experts sit in
    contiguous blocks of experts/n per rank (expert parallelism). A token goes once per
    chosen expert, even when two of them share a rank (a plain all-to-all dispatcher)."""
    import numpy as np

    per_rank = experts // n
    counts = np.zeros((n, n), dtype=np.int64)
    expert_ids = np.arange(experts, dtype=np.uint64)
    chunk = max(1, (1 << 20) // experts)
    for sender in range(n):
        base = np.uint64((seed * 0x100000001B3 + sender) * MAX_TOKENS % 2**64)
        for lo in range(0, tokens, chunk):
            token_ids = np.arange(lo, min(lo + chunk, tokens), dtype=np.uint64) + base
            keys = _hash(token_ids[:, None] * np.uint64(experts) + expert_ids[None, :])
            chosen = np.argpartition(keys, k - 1, axis=1)[:, :k]
            counts[sender] += np.bincount((chosen // per_rank).ravel(), minlength=n)
    return counts


def _too_much_routing(spec: str, hashes: int, ranks: int = 1) -> str:
    on = f" on {ranks} ranks" if ranks > 1 else ""
    return (
        f"bad --splits {spec!r}: routing TOKENS x EXPERTS{on} takes {hashes:.3g} hashes, "
        f"at most {MAX_ROUTING_HASHES:.3g} (about 15 s); route fewer tokens or experts"
    )
