"""Only colbench's lines and the table reach the terminal; library chatter goes to rank logs.

torch warns through Python's ``warnings`` (its C++ TORCH_WARN, called from Python, becomes
one) and libraries through ``logging``; on a CPU machine torch has nothing to warn about, so a
``sitecustomize`` makes the ranks' ``init_process_group`` warn both ways, as torch does
on GPUs. Everything else is a real sweep.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from tests.conftest import run_colbench

_SITECUSTOMIZE = textwrap.dedent(
    """
    import logging
    import os
    import warnings


    def _warn_in_ranks():
        import torch.distributed as dist

        join = dist.init_process_group

        def init_process_group(*args, **kwargs):
            joined = join(*args, **kwargs)
            warnings.warn("torch-like UserWarning from a rank", UserWarning)
            logging.getLogger("a_library").warning("library log record from a rank")
            return joined

        dist.init_process_group = init_process_group


    os.register_at_fork(after_in_child=_warn_in_ranks)
    """
)


def test_rank_warnings_go_to_rank_logs_not_the_terminal(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    out = tmp_path / "run"
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    proc = run_colbench(
        "sweep", "--op", "all", "--sizes", "1K-4K", "--nprocs", "2", "--out", str(out),
        env={"PYTHONPATH": path},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    stray = [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if line and not line.startswith(("colbench", "#", " "))
    ]
    assert stray == []
    for rank in (0, 1):
        log = (out / f"rank{rank}.log").read_text()
        assert "torch-like UserWarning from a rank" in log
        assert "library log record from a rank" in log
