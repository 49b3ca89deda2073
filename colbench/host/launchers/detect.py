"""Which launcher (torchrun / env://, Open MPI, MPICH/PMI, Slurm's srun) started this
process, from its environment variables. A partial or contradictory set is an error naming
what is wrong: guessing the rest is how multi-node jobs hang. When a launcher nests another
(torchrun started by srun, mpirun inside an allocation), the innermost one describes this
process, so the checks go torchrun, Open MPI, MPICH, Slurm. Slurm's compact host and task
lists (``node[01-02,07]``, ``2(x3),1``) are expanded here.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Mapping, Sequence

from colbench.errors import UsageError
from colbench.host.launchers.env import LaunchEnv

#: Slurm's special step ids (batch, extern, interactive...) sit at the top of uint32;
#: a process in one of them was not started by srun.
_SLURM_SPECIAL_STEP = 0xFFFFFFF0
#: Ports derived for Slurm jobs without MASTER_PORT lie in [base, base + span).
SLURM_PORT_BASE = 20000
SLURM_PORT_SPAN = 20000


def _int(env: Mapping[str, str], name: str) -> int:
    value = env[name]
    try:
        # Slurm writes some counts as "8(x2)"; the leading number is the one meant.
        return int(value.split("(")[0].strip())
    except ValueError:
        raise UsageError(f"environment variable {name}={value!r} is not an integer") from None


def _opt_int(env: Mapping[str, str], name: str) -> int | None:
    return _int(env, name) if name in env else None


def _require(launcher: str, env: Mapping[str, str], names: Sequence[str]) -> bool:
    """True when all of ``names`` are set, False when none is; an error when some are."""
    present = [n for n in names if n in env]
    if not present:
        return False
    missing = [n for n in names if n not in env]
    if missing:
        raise UsageError(
            f"{launcher} environment is incomplete: {', '.join(present)} set but "
            f"{', '.join(missing)} missing"
        )
    return True


def _master(
    launcher: str, world: int, addr: str | None, port: int | None
) -> tuple[str | None, int | None]:
    if world > 1 and (addr is None or port is None):
        missing = [n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port)) if v is None]
        hint = (
            "; MPI launchers have no rendezvous of their own, so export them (rank 0's "
            "host and a free port) to every rank, e.g. mpirun -x MASTER_ADDR -x MASTER_PORT"
            if launcher in ("openmpi", "mpich")
            else "; export them before starting colbench"
        )
        raise UsageError(
            f"{launcher} launch of {world} ranks needs {' and '.join(missing)} to find rank 0{hint}"
        )
    if port is not None and not 0 < port < 65536:
        raise UsageError(f"MASTER_PORT={port} is not a TCP port (1-65535)")
    return addr, port


def _checked(found: LaunchEnv, names: tuple[str, str, str, str]) -> LaunchEnv:
    """Refuse a contradictory set: every number must fit the others."""
    rank_var, world_var, local_var, local_world_var = names
    rank, world, local = found.rank, found.world_size, found.local_rank
    if world < 1:
        raise UsageError(f"{world_var}={world}: a job needs at least one rank")
    if not 0 <= rank < world:
        raise UsageError(f"{rank_var}={rank} is not a rank of {world_var}={world}")
    local_world = found.local_world_size
    if local_world is not None:
        if not 1 <= local_world <= world:
            raise UsageError(
                f"{local_world_var}={local_world} does not fit {world_var}={world}: a node "
                f"holds between 1 and {world} ranks"
            )
        if not 0 <= local < local_world:
            raise UsageError(
                f"{local_var}={local} is not a local rank of {local_world_var}={local_world}"
            )
    elif not 0 <= local < world:
        raise UsageError(f"{local_var}={local} is not a local rank of {world_var}={world}")
    if found.nnodes is not None:
        if not 1 <= found.nnodes <= world:
            raise UsageError(
                f"{found.launcher} says the job has {found.nnodes} nodes for {world} ranks"
            )
        if found.node_rank is not None and not 0 <= found.node_rank < found.nnodes:
            raise UsageError(
                f"{found.launcher} says this is node {found.node_rank} of {found.nnodes}"
            )
    return found


def _from_vars(
    launcher: str,
    env: Mapping[str, str],
    names: tuple[str, str, str, str],
    node_rank: int | None = None,
    nnodes: int | None = None,
) -> LaunchEnv:
    """A launcher that names rank, world size, local rank and local world size outright
    (``names``, in that order; the last may be unset), with MASTER_ADDR/PORT from env."""
    rank_var, world_var, local_var, local_world_var = names
    world = _int(env, world_var)
    addr, port = _master(launcher, world, env.get("MASTER_ADDR"), _opt_int(env, "MASTER_PORT"))
    found = LaunchEnv(
        launcher=launcher,
        rank=_int(env, rank_var),
        world_size=world,
        local_rank=_int(env, local_var),
        local_world_size=_opt_int(env, local_world_var),
        master_addr=addr,
        master_port=port,
        node_rank=node_rank,
        nnodes=nnodes,
    )
    return _checked(found, names)


def _torchrun(env: Mapping[str, str]) -> LaunchEnv | None:
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    if not _require("torchrun/env://", env, names[:3]):
        return None
    launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
    # torchrun's "group" is one agent, i.e. one node.
    node_rank, nnodes = _opt_int(env, "GROUP_RANK"), _opt_int(env, "GROUP_WORLD_SIZE")
    return _from_vars(launcher, env, names, node_rank, nnodes)


def _openmpi(env: Mapping[str, str]) -> LaunchEnv | None:
    names = (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    )
    if not _require("openmpi", env, names[:3]):
        return None
    return _from_vars("openmpi", env, names)


def _mpich(env: Mapping[str, str]) -> LaunchEnv | None:
    names = ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")
    if not _require("mpich", env, names[:2]):
        return None
    if "MPI_LOCALRANKID" not in env:
        slurm = _slurm(env)
        # srun --mpi=pmi2 sets PMI_* but not Hydra's local ids; srun's own say the same.
        if slurm is not None and slurm.rank == _int(env, "PMI_RANK"):
            return slurm
        raise UsageError(
            "mpich environment is incomplete: PMI_RANK, PMI_SIZE set but MPI_LOCALRANKID "
            "missing (Hydra's mpiexec sets it; it picks this rank's GPU)"
        )
    return _from_vars("mpich", env, names)


def _slurm_step(env: Mapping[str, str]) -> int | None:
    """The srun step id, or None outside a step started by srun."""
    for name in ("SLURM_STEP_ID", "SLURM_STEPID"):
        if name in env:
            step = _int(env, name)
            return step if 0 <= step < _SLURM_SPECIAL_STEP else None
    return None


def slurm_default_port(job_id: int, step_id: int) -> int:
    """A port every task of one srun step derives alike, spread so that concurrent
    steps and jobs sharing a node rarely pick the same one."""
    return SLURM_PORT_BASE + zlib.crc32(f"{job_id}.{step_id}".encode()) % SLURM_PORT_SPAN


def _slurm(env: Mapping[str, str]) -> LaunchEnv | None:
    step = _slurm_step(env)
    if step is None:
        return None
    names = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")
    if not _require("slurm", env, names):
        return None
    world = _int(env, "SLURM_NTASKS")
    nodelist_var = next(
        (v for v in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST") if v in env),
        None,
    )
    hosts = tuple(expand_hostlist(env[nodelist_var], nodelist_var)) if nodelist_var else ()
    node_rank = _opt_int(env, "SLURM_NODEID")
    nnodes = _opt_int(env, "SLURM_STEP_NUM_NODES") or _opt_int(env, "SLURM_NNODES")
    local_world = None
    per_node_var = next(
        (v for v in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE") if v in env), None
    )
    if per_node_var is not None and node_rank is not None:
        per_node = expand_tasks_per_node(env[per_node_var], per_node_var)
        if node_rank < len(per_node):
            local_world = per_node[node_rank]
    elif "SLURM_NTASKS_PER_NODE" in env:
        local_world = _int(env, "SLURM_NTASKS_PER_NODE")
    addr = env.get("MASTER_ADDR") or (hosts[0] if hosts else None)
    port = _opt_int(env, "MASTER_PORT")
    if port is None and "SLURM_JOB_ID" in env:
        port = slurm_default_port(_int(env, "SLURM_JOB_ID"), step)
    addr, port = _master("slurm", world, addr, port)
    found = LaunchEnv(
        launcher="slurm",
        rank=_int(env, "SLURM_PROCID"),
        world_size=world,
        local_rank=_int(env, "SLURM_LOCALID"),
        local_world_size=local_world,
        master_addr=addr,
        master_port=port,
        node_rank=node_rank,
        nnodes=nnodes,
        hosts=hosts,
    )
    return _checked(found, (*names, per_node_var or "SLURM_NTASKS_PER_NODE"))


def _refuse_sbatch_without_srun(env: Mapping[str, str]) -> None:
    if "SLURM_JOB_ID" not in env or "SLURM_NTASKS" not in env or _slurm_step(env) is not None:
        return
    tasks = _int(env, "SLURM_NTASKS")
    if tasks > 1:
        raise UsageError(
            f"inside Slurm job {env['SLURM_JOB_ID']} with SLURM_NTASKS={tasks} but not "
            "under srun, so this is one process, not a job of ranks: start it with "
            "`srun colbench sweep ...` (or unset SLURM_NTASKS to spawn ranks on this node)"
        )


_SCHEMES = (_torchrun, _openmpi, _mpich, _slurm)


def detect(env: Mapping[str, str] | None = None) -> LaunchEnv | None:
    """The launcher that started this process, or None when colbench should spawn ranks."""
    env = os.environ if env is None else env
    for scheme in _SCHEMES:
        found = scheme(env)
        if found is not None:
            return found
    _refuse_sbatch_without_srun(env)
    return None


#: The variables that place a process in each launcher's job (what a stale shell or a
#: single-task allocation leaves behind), besides MASTER_ADDR and MASTER_PORT.
_PLACING = {
    "torchrun": ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                 "GROUP_WORLD_SIZE", "TORCHELASTIC_USE_AGENT_STORE"),
    "openmpi": ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE"),
    "mpich": ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    "slurm": ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
}  # fmt: skip
_PLACING["env"] = _PLACING["torchrun"]
_BY = {
    "torchrun": "torchrun's variables",
    "env": "the env:// variables",
    "openmpi": "Open MPI's variables",
    "mpich": "MPICH's variables",
    "slurm": "srun's variables",
}


def join_or_spawn(
    nprocs: int | None, env: Mapping[str, str] | None = None
) -> tuple[LaunchEnv | None, tuple[str, ...]]:
    """(the launcher's job to join, or None to spawn; the launcher variables set aside).
    An explicit ``--nprocs`` (or a suite's ``nprocs``) asks colbench to start the ranks:
    beside a launcher's world of one (a single-task allocation, a shell left with torchrun's
    variables) it wins, the variables it sets aside returned to be named; beside a larger
    world it contradicts the launcher, and is refused."""
    env = os.environ if env is None else env
    found = detect(env)
    if found is None or nprocs is None:
        return found, ()
    # The variables of ``env`` that made ``found`` (``NAME=value``, in a fixed order).
    names = (*_PLACING[found.launcher], "MASTER_ADDR", "MASTER_PORT")
    placing = tuple(f"{name}={env[name]}" for name in names if name in env)
    if found.world_size > 1:
        raise UsageError(
            f"--nprocs {nprocs} asks colbench to start the ranks, but {_BY[found.launcher]} "
            f"make this process rank {found.rank} of {found.world_size} "
            f"({' '.join(placing)}): drop --nprocs to run as that rank, or unset "
            f"{', '.join(p.split('=')[0] for p in placing)} to spawn {nprocs} ranks here"
        )
    return None, placing


def _split_top(text: str, what: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise UsageError(f"{what}={text!r}: nested brackets")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"{what}={text!r}: ']' without '['")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise UsageError(f"{what}={text!r}: '[' without ']'")
    parts.append(text[start:])
    return parts


def _expand_range(body: str, text: str, what: str) -> list[str]:
    out: list[str] = []
    for item in body.split(","):
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise UsageError(f"{what}={text!r}: bad range {item!r} in brackets")
        if not sep:
            out.append(lo)
            continue
        if int(hi) < int(lo):
            raise UsageError(f"{what}={text!r}: range {item!r} runs backwards")
        # Slurm keeps the zero padding of the lower bound: node[08-10] -> node08..node10.
        width = len(lo) if lo.startswith("0") else 0
        out.extend(f"{i:0{width}d}" for i in range(int(lo), int(hi) + 1))
    return out


def _expand_one(item: str, text: str, what: str) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.index("]", open_at)
    prefix, body, rest = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    tails = _expand_one(rest, text, what)
    return [prefix + num + tail for num in _expand_range(body, text, what) for tail in tails]


def expand_hostlist(text: str, what: str = "SLURM_JOB_NODELIST") -> list[str]:
    """Slurm hostlist syntax -> host names: ``node[01-02,07],gpu-a[1-2]`` ->
    node01 node02 node07 gpu-a1 gpu-a2. Several bracket groups in one name expand as a
    product (``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2)."""
    hosts: list[str] = []
    for item in _split_top(text.strip(), what):
        item = item.strip()
        if not item:
            raise UsageError(f"{what}={text!r}: empty host name")
        hosts.extend(_expand_one(item, text, what))
    return hosts


_TASKS_ITEM = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def expand_tasks_per_node(text: str, what: str = "SLURM_TASKS_PER_NODE") -> list[int]:
    """Slurm's ``2(x3),1`` -> [2, 2, 2, 1]: tasks on each node of the step, in node order."""
    out: list[int] = []
    for item in text.split(","):
        match = _TASKS_ITEM.match(item.strip())
        if match is None:
            raise UsageError(f"{what}={text!r}: expected counts like 8(x2),4")
        out.extend([int(match.group(1))] * int(match.group(2) or 1))
    return out
