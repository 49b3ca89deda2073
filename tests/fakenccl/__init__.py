"""A recording nccl4py for a machine without GPUs: see nccl/_fake.py here.

Put this directory first on ``sys.path`` (or PYTHONPATH) and ``import nccl`` finds the
fake. ``FAKE_NCCL`` is that directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FAKE_NCCL = Path(__file__).resolve().parent


def records(record_dir: Path) -> list[dict[str, Any]]:
    """Every call any process made on the fake, in each process's order."""
    lines = [
        line for f in sorted(record_dir.glob("*.jsonl")) for line in f.read_text().splitlines()
    ]
    return [json.loads(line) for line in lines]
