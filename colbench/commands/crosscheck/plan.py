"""``colbench crosscheck``: one sweep through nccl-tests and through colbench, side by side.

A GPU user's first question is whether colbench's numbers match nccl-tests'. This plans
the op's nccl-tests program (``all_reduce_perf``...) and ``colbench sweep`` with the same
measurement, checked before anything runs. nccl-tests runs as one process driving N GPUs
of this node (``-g N``), the form every build supports; across nodes it needs an MPI
build and colbench a launcher, which this command starts neither of (:data:`MULTI_NODE`).
"""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.bench import ops
from colbench.bench.ops.base import Collective
from colbench.bench.ops.data import DTYPES, parse_dtypes, parse_redops
from colbench.commands.crosscheck import FORWARDED, MAPPED
from colbench.config import model as config
from colbench.config import validate
from colbench.config.sizes import format_size
from colbench.direct.engine import DIRECT, TORCH
from colbench.direct.knobs import REGISTER_MODES, parse_cta_policies, parse_register
from colbench.direct.nccl4py import missing
from colbench.errors import UsageError
from colbench.host.launchers import gpus
from colbench.host.launchers.detect import detect
from colbench.results.rundir import RunDir, stamped_name

BUILD_HINT = (
    "build nccl-tests (git clone https://github.com/NVIDIA/nccl-tests && make -C nccl-tests "
    "CUDA_HOME=... NCCL_HOME=...) and pass --nccl-tests nccl-tests/build or put it on PATH"
)
#: How to run both sides across nodes, which this command does not.
MULTI_NODE = (
    "across nodes, run nccl-tests built with MPI=1 under mpirun (mpirun -np 16 -N 8 "
    "all_reduce_perf -g 1 ...) and colbench under your launcher with the same flags, then "
    "`colbench import nccl-tests LOG` and `colbench compare IMPORTED RUN --metric time`"
)
#: The module that starts each nccl-tests rank of an emulated world under mpiexec.
EMULATED_RANK = "colbench.commands.crosscheck.emulated_rank"


@dataclass(frozen=True)
class Plan:
    """One validated cross-check: the sweep, the ranks, and the nccl-tests program."""

    cfg: config.SweepConfig
    coll: Collective
    ranks: int
    binary: Path
    #: -b/-e with -f or -i, the same for both tools.
    size_flags: tuple[str, ...]
    #: Forwarded sweep flags, for colbench's side only.
    forwarded: tuple[str, ...] = ()
    #: The MPI launcher (with its flags) of an emulated world's nccl-tests ranks.
    mpiexec: tuple[str, ...] = ()
    #: nccl-tests' -p (parallel init), passed on to it; colbench's ranks start alike either way.
    parallel_init: int = 0
    #: nccl-tests' -x, one CTA policy for both sides (colbench's as NCCL_CTA_POLICY); None: unset.
    cta_policy: str | None = None

    @property
    def ranks_per_gpu(self) -> int:
        """Above 1: both sides run one emulated world (K ranks per GPU, each an NCCL node
        of its own), nccl-tests as one process per rank under ``mpiexec``."""
        return self.cfg.launch.ranks_per_gpu

    def nccl_tests_argv(self) -> list[str]:
        m = self.cfg.measure
        if self.ranks_per_gpu > 1:
            argv = [*self.mpiexec, "-n", str(self.ranks), sys.executable, "-m"]
            argv += [EMULATED_RANK, str(self.ranks_per_gpu), str(self.binary)]
            argv += [*self.size_flags, "-g", "1"]
        else:
            argv = [str(self.binary), *self.size_flags, "-g", str(self.ranks)]
        argv += ["-d", DTYPES[m.dtypes[0]].nccl_name]
        if self.coll.uses_redop:
            argv += ["-o", m.redops[0]]
        if self.coll.rooted:
            argv += ["-r", str(m.root)]
        argv += ["-n", str(m.iters), "-w", str(m.warmup), "-c", str(m.check)]
        # nccl-tests' -a takes 0-3; parse_average knows which digit is which.
        argv += ["-a", next(d for d in "0123" if config.parse_average(d) == m.average)]
        if m.cuda_graph:
            # Both capture -n calls in one graph and launch it this many times.
            argv += ["-G", str(m.cuda_graph)]
        if self.parallel_init:
            argv += ["-p", str(self.parallel_init)]
        if m.register != "none":
            argv += ["-R", str(REGISTER_MODES.index(m.register))]
        if self.cta_policy is not None:
            argv += ["-x", self.cta_policy]
        return argv

    def colbench_argv(self, run_dir: Path) -> list[str]:
        cfg = self.cfg
        argv = [sys.executable, "-m", "colbench", "sweep", "--op", self.coll.name]
        argv += [*self.size_flags, "--dtype", cfg.measure.dtypes[0]]
        if self.coll.uses_redop:
            argv += ["--redop", cfg.measure.redops[0]]
        if self.coll.rooted:
            argv += ["--root", str(cfg.measure.root)]
        argv += ["--placement", ",".join(cfg.measure.placements), "--iters", str(cfg.measure.iters)]
        argv += ["--warmup", str(cfg.measure.warmup), "--check", str(cfg.measure.check)]
        argv += ["--average", cfg.measure.average, "--backend", cfg.launch.backend]
        argv += ["--nprocs", str(self.ranks)]
        if cfg.measure.cuda_graph:
            argv += ["--cuda-graph", str(cfg.measure.cuda_graph)]
        if self.ranks_per_gpu > 1:
            argv += ["--ranks-per-gpu", str(self.ranks_per_gpu)]
        if cfg.measure.engines != ("torch",):
            argv += ["--engine", ",".join(cfg.measure.engines)]
        if cfg.measure.register != "none":
            argv += ["--register", cfg.measure.register]
        if self.cta_policy is not None:
            argv += ["--cta-policy", self.cta_policy]
        return [*argv, *self.forwarded, "--out", str(run_dir)]


def size_flags(sizes: Sequence[int]) -> tuple[str, ...]:
    """nccl-tests' -b/-e and -f (a whole factor) or -i (a step in bytes) for these sizes."""
    low, high = str(sizes[0]), str(sizes[-1])
    if len(sizes) == 1:
        return ("-b", low, "-e", high)
    pairs = list(itertools.pairwise(sizes))
    factor = sizes[1] // sizes[0]
    if sizes[1] % sizes[0] == 0 and all(b == a * factor for a, b in pairs):
        return ("-b", low, "-e", high, "-f", str(factor))
    step = sizes[1] - sizes[0]
    if all(b - a == step for a, b in pairs):
        return ("-b", low, "-e", high, "-i", str(step))
    shown = ", ".join(format_size(s) for s in sizes[:4]) + (", ..." if len(sizes) > 4 else "")
    raise UsageError(
        f"nccl-tests steps sizes by a whole factor (-f) or a fixed number of bytes (-i), and "
        f"{shown} is neither; use e.g. --sizes 1K-1M or -b 1K -e 1M -f 4"
    )


def find_binary(coll: Collective, directory: str | None, path_env: str | None = None) -> Path:
    """The op's nccl-tests program in ``directory`` (or its build/), else on PATH. Builds with
    ``NAME_SUFFIX=_mpi`` (nccl-tests' README) are found too."""
    name = coll.nccl_tests_binary
    if not name:
        have = ", ".join(c.name for c in ops.REGISTRY if c.nccl_tests_binary)
        raise UsageError(f"nccl-tests has no test for {coll.name}; crosscheck takes {have}")
    names = (name, f"{name}_mpi")
    if directory is not None:
        base = Path(directory).expanduser()
        if not base.is_dir():
            raise UsageError(f"--nccl-tests {directory}: no such directory; {BUILD_HINT}")
        # Folder by folder: the directory's own program before its build/'s.
        folders, where = [str(base), str(base / "build")], f"{base} or {base / 'build'}"
    else:
        folders, where = [os.environ.get("PATH", "") if path_env is None else path_env], "PATH"
    for folder in folders:
        for n in names:
            found = shutil.which(n, path=folder)
            if found:
                return Path(found)
    raise UsageError(f"no {name} (or {name}_mpi) in {where}; {BUILD_HINT}")


def _one(kind: str, values: Sequence[object], text: str) -> None:
    if len(values) != 1:
        raise UsageError(f"crosscheck compares one {kind} at a time, got --{kind} {text}")


_UNLIKE = "nccl-tests has nothing like it, so the two runs would not measure the same thing"
# Options nccl-tests does have, but whose output a cross-check has no place for.
_REFUSED_WHY = {
    name: "its report is one run's, and a cross-check writes its own comparison; "
    "run `colbench sweep -J FILE.json` (or nccl-tests -J) for it"
    for name in ("output_file", "per_iter_timing")
}


def make_plan(
    params: Mapping[str, Any],
    given: set[str],
    nccl_tests_dir: str | None,
    gpu_count: Callable[[], int] | None = None,
    mpiexec: str | None = None,
) -> Plan:
    """Validate sweep-style options for a cross-check (raises UsageError before anything runs).
    ``params`` are sweep's parsed options and ``given`` the names given on the command line."""
    refused = sorted(given - MAPPED - set(FORWARDED))
    if refused:
        flag = "--" + refused[0].replace("_", "-")
        raise UsageError(f"crosscheck cannot use {flag}: " + _REFUSED_WHY.get(refused[0], _UNLIKE))
    found = detect()
    if found is not None:
        raise UsageError(
            f"crosscheck starts nccl-tests and colbench itself on one node, not under a "
            f"launcher ({found.launcher}); {MULTI_NODE}"
        )
    op_text = str(params["op"])
    if "," in op_text or op_text.strip() == "all":
        raise UsageError(f"crosscheck compares one op at a time, got --op {op_text}")
    coll = ops.get(op_text)
    binary = find_binary(coll, nccl_tests_dir)
    cfg = _sweep_config(coll, params)
    cfg = cfg.replace(engines=_engine(params, given, cfg.launch.backend))
    cfg = cfg.replace(register=_register(cfg, params, given))
    cta_policy = _cta_policy(params, given)
    sizes = size_flags(cfg.measure.sizes_bytes)
    if mpiexec is not None and cfg.launch.ranks_per_gpu <= 1:
        raise UsageError(
            "--mpiexec starts the nccl-tests ranks of an emulated world: it needs "
            "--ranks-per-gpu 2 or more"
        )
    launcher = find_mpiexec(mpiexec) if cfg.launch.ranks_per_gpu > 1 else ()
    ranks = _ranks(cfg, gpu_count or gpus.gpu_count)
    validate.validate_for_world(cfg, ranks, cfg.launch.backend)
    forwarded = _forward(params, given)
    parallel_init = int(params.get("parallel_init") or 0)
    return Plan(cfg, coll, ranks, binary, sizes, forwarded, launcher, parallel_init, cta_policy)


def _register(cfg: config.SweepConfig, params: Mapping[str, Any], given: set[str]) -> str:
    """nccl-tests' -R on both sides: colbench's registers only through the direct engine."""
    register = parse_register(str(params["register"])) if "register" in given else "none"
    if register != "none" and cfg.measure.engines != (DIRECT,):
        raise UsageError(
            f"crosscheck --register {register}: nccl-tests registers its buffers, and "
            "colbench's side can only through the direct engine (--engine nccl, with nccl4py)"
        )
    return register


def _cta_policy(params: Mapping[str, Any], given: set[str]) -> str | None:
    """nccl-tests' -x on both sides: one policy, as nccl-tests takes one."""
    if "cta_policy" not in given or params["cta_policy"] is None:
        return None
    policies = parse_cta_policies(str(params["cta_policy"]))
    if len(policies) > 1:
        raise UsageError(
            f"crosscheck compares one CTA policy at a time (nccl-tests' -x takes one), got "
            f"--cta-policy {params['cta_policy']}"
        )
    return policies[0]


def find_mpiexec(given: str | None, path_env: str | None = None) -> tuple[str, ...]:
    """``--mpiexec`` split as a shell would (``"mpiexec -launcher fork"``), else mpiexec or
    mpirun on PATH: an emulated nccl-tests world is one MPI process per rank."""
    if given is not None:
        words = tuple(shlex.split(given))
        if not words or shutil.which(words[0], path=path_env) is None:
            raise UsageError(f"--mpiexec {given!r}: no such program")
        return words
    for name in ("mpiexec", "mpirun"):
        found = shutil.which(name, path=path_env)
        if found:
            return (found,)
    raise UsageError(
        "--ranks-per-gpu runs nccl-tests as one MPI process per rank: no mpiexec or mpirun "
        "on PATH; pass --mpiexec, and build nccl-tests with MPI=1"
    )


def _sweep_config(coll: Collective, params: Mapping[str, Any]) -> config.SweepConfig:
    """What both tools measure, checked as sweep checks it, plus one dtype and one redop."""
    _one("dtype", parse_dtypes(str(params["dtype"])), str(params["dtype"]))
    _one("redop", parse_redops(str(params["redop"])), str(params["redop"]))
    if params["root"] == -1 and coll.rooted:
        raise UsageError("crosscheck compares one root at a time, got --root -1 (every root)")
    if params["backend"] not in ("auto", "nccl", "gloo"):
        raise UsageError(f"bad --backend {params['backend']!r}: use nccl (default) or gloo")
    return validate.build(
        op=coll.name,
        sizes=validate.resolve_sizes(
            *(params[k] for k in ("sizes", "minbytes", "maxbytes", "factor", "step"))
        ),
        dtype=str(params["dtype"]),
        redop=str(params["redop"]),
        root=params["root"],
        placements=config.parse_placements(str(params["placement"])),
        iters=params["iters"],
        warmup=params["warmup"],
        check=config.check_passes(params["check"]),
        average=config.parse_average(str(params["average"])),
        # nccl-tests is NCCL, so auto means NCCL; gloo only tests the cross-check on a CPU.
        backend="gloo" if params["backend"] == "gloo" else "nccl",
        nprocs=params["nprocs"],
        cuda_graph=params["cuda_graph"],
        ranks_per_gpu=params.get("ranks_per_gpu") or 1,
    )


def _engine(params: Mapping[str, Any], given: set[str], backend: str) -> tuple[str, ...]:
    """What colbench's side calls through: ``--engine`` as given (one); else, on NCCL
    where nccl4py is installed, NCCL itself, as nccl-tests does, so the ratio compares
    NCCL's time with NCCL's time at every size (through torch, torch's per-call cost fills
    every small row: colbench.direct)."""
    if "engine" in given:
        engines = config.parse_engines(str(params["engine"]))
        _one("engine", engines, str(params["engine"]))
        return engines
    return (DIRECT,) if backend == "nccl" and missing() is None else (TORCH,)


def _ranks(cfg: config.SweepConfig, gpu_count: Callable[[], int]) -> int:
    """--nprocs, else every visible GPU (2 ranks on gloo); nccl-tests -g N needs N GPUs here."""
    if cfg.launch.backend != "nccl":
        return cfg.launch.nprocs if cfg.launch.nprocs is not None else 2
    gpus = gpu_count()
    if gpus == 0:
        raise UsageError(
            "no CUDA GPU is visible: nccl-tests and colbench's NCCL side need GPUs "
            "(--backend gloo runs colbench on the CPU, to test the cross-check itself)"
        )
    per_gpu = cfg.launch.ranks_per_gpu
    slots = gpus * per_gpu
    ranks = cfg.launch.nprocs if cfg.launch.nprocs is not None else slots
    if ranks > slots:
        where = "-g N drives N GPUs of this node"
        if per_gpu > 1:
            where = f"--ranks-per-gpu {per_gpu} gives {slots} rank(s)"
        raise UsageError(f"--nprocs {ranks} but {gpus} GPU(s) are visible: {where}; {MULTI_NODE}")
    return ranks


def _forward(params: Mapping[str, Any], given: set[str]) -> tuple[str, ...]:
    flags: list[str] = []
    for name in (n for n in FORWARDED if n in given):
        flag, value = name.replace("_", "-"), params[name]
        if isinstance(value, bool):
            flags.append(f"--{flag}" if value else f"--no-{flag}")
        else:
            flags += [f"--{flag}", str(value)]
    return tuple(flags)


def out_dir(plan: Plan, out: str | None, results_root: str) -> Path:
    """A new or empty directory: ``--out``, else ``<results>/<stamp>-crosscheck-<op>-<backend>``."""
    name = stamped_name("crosscheck", plan.coll.name, plan.cfg.launch.backend)
    return RunDir.create(out, Path(results_root) / name).path.resolve()
