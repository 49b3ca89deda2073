"""Size specs: binary units in, sorted byte lists out (colbench.config.sizes)."""

from __future__ import annotations

import pytest

from colbench.config.sizes import MAX_SIZE_BYTES, format_size, parse_size, parse_sizes, size_range
from colbench.errors import UsageError

K, M, G = 1024, 1024**2, 1024**3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512", 512),
        ("0", 0),
        ("1K", K),
        ("1k", K),
        ("1KB", K),
        ("1KiB", K),
        ("1kib", K),
        ("1M", M),
        ("64m", 64 * M),
        ("1G", G),
        ("1T", 1024**4),
        ("1.5K", 1536),
        ("0.5M", 512 * K),
        (" 4K ", 4 * K),
        ("8B", 8),
    ],
)
def test_parse_size_binary_units(text: str, expected: int) -> None:
    assert parse_size(text) == expected


def test_parse_size_is_binary_not_decimal() -> None:
    assert parse_size("1K") != 1000
    assert parse_size("1G") == 1_073_741_824


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "bad size"),
        ("   ", "bad size"),
        ("abc", "bad size"),
        ("K", "bad size"),
        ("-1K", "bad size"),
        ("1X", "bad size"),
        ("1.3", "whole number"),
        ("1.0001K", "whole number"),
        ("2T", "larger than"),
        ("1025G", "larger than"),
        ("99999999999999999999", "larger than"),
    ],
)
def test_parse_size_errors(text: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment) as info:
        parse_size(text)
    # The message quotes what the user typed.
    assert repr(text) in str(info.value)


def test_max_size_is_accepted_and_one_more_byte_is_not() -> None:
    assert parse_size(str(MAX_SIZE_BYTES)) == MAX_SIZE_BYTES
    with pytest.raises(UsageError):
        parse_size(str(MAX_SIZE_BYTES + 1))


def test_range_doubles_by_default() -> None:
    assert parse_sizes("1K-1M") == [K * 2**i for i in range(11)]


def test_range_with_factor_four() -> None:
    assert parse_sizes("1K-1M", factor=4) == [K, 4 * K, 16 * K, 64 * K, 256 * K, M]


def test_range_stops_at_max_without_overshooting() -> None:
    assert parse_sizes("1K-5K") == [K, 2 * K, 4 * K]
    assert parse_sizes("3-100", factor=3) == [3, 9, 27, 81]


def test_range_fractional_factor_never_repeats_a_size() -> None:
    sizes = parse_sizes("1-20", factor=1.25)
    assert sizes == sorted(set(sizes))
    assert sizes[0] == 1 and sizes[-1] <= 20
    assert sizes == [1, 2, 3, 4, 5, 7, 9, 11, 14, 18]


def test_range_with_step_bytes() -> None:
    assert parse_sizes("1K-4K", step_bytes=K) == [K, 2 * K, 3 * K, 4 * K]
    assert parse_sizes("100-350", step_bytes=100) == [100, 200, 300]


def test_range_of_one_size() -> None:
    assert parse_sizes("4K-4K") == [4 * K]


def test_list_is_sorted_and_unique() -> None:
    assert parse_sizes("1K,4K,1M") == [K, 4 * K, M]
    assert parse_sizes("1M, 1K,4K,1024,1K") == [K, 4 * K, M]
    assert parse_sizes("1K,") == [K]


def test_single_size() -> None:
    assert parse_sizes("64M") == [64 * M]


@pytest.mark.parametrize(
    ("spec", "kwargs", "fragment"),
    [
        ("", {}, "empty size"),
        ("  ", {}, "empty size"),
        ("1M-1K", {}, "larger than maximum"),
        ("1K-1M", {"factor": 1.0}, "greater than 1"),
        ("1K-1M", {"factor": 0.5}, "greater than 1"),
        ("1K-1M", {"factor": float("inf")}, "greater than 1"),
        ("1K-1M", {"factor": float("nan")}, "greater than 1"),
        ("1K-1M", {"step_bytes": 0}, "at least 1 byte"),
        ("0-1K", {}, "at least 1 byte"),
        ("1K,4K", {"factor": 2.0}, "range"),
        ("1K,4K", {"step_bytes": 8}, "range"),
        ("1-1M", {"step_bytes": 1}, "at most 10000"),
        ("1K-zz", {}, "bad size"),
    ],
)
def test_parse_sizes_errors(spec: str, kwargs: dict, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        parse_sizes(spec, **kwargs)


def test_size_range_min_greater_than_max_names_both() -> None:
    with pytest.raises(UsageError) as info:
        size_range(2 * M, K)
    assert "2M" in str(info.value) and "1K" in str(info.value)


@pytest.mark.parametrize(
    ("size_bytes", "text"),
    [
        (0, "0"),
        (1, "1"),
        (1000, "1000"),
        (1024, "1K"),
        (1536, "1536"),
        (3 * K, "3K"),
        (M, "1M"),
        (1025 * K, "1025K"),
        (G, "1G"),
        (1024**4, "1T"),
    ],
)
def test_format_size(size_bytes: int, text: str) -> None:
    assert format_size(size_bytes) == text


@pytest.mark.parametrize("size_bytes", [1, 7, 1024, 1536, 3 * M, 5 * G, 1024**4])
def test_format_size_round_trips(size_bytes: int) -> None:
    assert parse_size(format_size(size_bytes)) == size_bytes
