"""Where the tests' third-party data lives: ``tests/data/``, inside the repository.

Real logs and reports from public sources (each folder's INDEX.md names the source of every
file and holds its truth table). They are copied into the repository so that a clone
anywhere, with nothing beside it, runs every test that reads them: a missing file is a
failure of that test, never a skip.
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
#: NCCL_DEBUG=INFO logs (colbench.nccl, explain-log).
NCCL_DEBUG_LOGS = DATA_DIR / "nccl-debug-logs"
#: nccl-tests and rccl-tests stdout (import nccl-tests, crosscheck's stand-in).
NCCL_TESTS_LOGS = DATA_DIR / "nccl-tests-logs"
#: nccl-tests ``-J FILE`` JSON reports.
NCCL_TESTS_JSON = DATA_DIR / "nccl-tests-json"
#: NCCL Inspector JSON output: examples written from NCCL's source (see its INDEX.md).
NCCL_INSPECTOR = DATA_DIR / "nccl-inspector"
