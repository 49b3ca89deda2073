"""The repository stands alone: every file a test reads is inside it.

CI runs in a clone that has the developers' data folder beside it, so a test that read it
would pass there and fail on every user's machine; this test is what catches such a
reference coming back.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.datadir import DATA_DIR

REPO = Path(__file__).resolve().parents[2]
#: Built from pieces so that this file does not name what it looks for.
_OUTSIDE = re.compile(re.escape("../" + "shared") + "|" + re.escape("shared" + "/data"))
#: Build outputs, caches and run results: not part of what a user clones.
_SKIP_DIRS = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
              ".gate-ab", "build", "dist"}  # fmt: skip
_BINARY = {".png", ".pdf", ".pyc", ".gz", ".whl"}


def _repo_files() -> list[Path]:
    files = []
    for path in REPO.rglob("*"):
        parts = path.relative_to(REPO).parts
        if any(p in _SKIP_DIRS or p.endswith(".egg-info") for p in parts):
            continue
        if parts[0] == "results" and parts[1:2] != ("baselines",):
            continue
        if path.is_file() and path.suffix not in _BINARY:
            files.append(path)
    return files


def test_no_file_of_the_repository_reads_outside_it() -> None:
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path in _repo_files()
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        if _OUTSIDE.search(line)
    ]
    assert found == [], "these lines refer to a folder beside the repository: " + ", ".join(found)


def test_the_check_finds_a_reference() -> None:
    assert _OUTSIDE.search("LOGS = ROOT / '.." + "/shared/" + "data/x.log'")
    assert not _OUTSIDE.search("LOGS = ROOT / 'tests/data/x.log'")


@pytest.mark.parametrize(
    "folder", ["nccl-debug-logs", "nccl-tests-logs", "nccl-tests-json", "nccl-inspector"]
)
def test_every_data_file_has_its_source_in_the_index(folder: str) -> None:
    index = (DATA_DIR / folder / "INDEX.md").read_text()
    files = sorted(p.name for p in (DATA_DIR / folder).iterdir() if p.name != "INDEX.md")
    assert files, f"tests/data/{folder} holds no data"
    assert [name for name in files if name not in index] == []
