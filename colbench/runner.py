"""Runs a sweep: picks the backend, makes the run directory, starts or joins ranks.

The parent (when colbench spawns ranks itself) owns the rendezvous store on a port
the OS picks, so two runs at once never collide. Rank 0 writes every file; the
parent only finalises ``meta.json`` when rank 0 could not.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench import launch, metadata, preflight
from colbench.bench import InFlight, RankBench, RunInfo, count_units, plan
from colbench.config import SweepConfig, validate_for_world
from colbench.errors import ExitCode, RankFailure, UsageError
from colbench.groups import split_world
from colbench.launch import LaunchEnv, detect
from colbench.ops import REGISTRY
from colbench.report.console import TableSink, run_header
from colbench.report.progress import progress_bar
from colbench.results import RowWriter

#: Spawned ranks connect to the parent's store here; single-node runs stay on loopback.
LOCAL_HOST = "127.0.0.1"


@dataclass(frozen=True)
class RankJob:
    """Everything a rank needs; pickled into spawned processes."""

    cfg: SweepConfig
    backend: str
    world_size: int
    launcher: str
    run_dir: str | None
    run_id: str
    #: The parent's TCPStore; None means env:// (an external launcher's rendezvous).
    store_host: str | None = None
    store_port: int | None = None


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_backend(requested: str, spawning: bool, gpu_count: int, nccl_available: bool) -> str:
    """``auto`` -> nccl when there are GPUs for it, else gloo; explicit nccl is checked."""
    if requested == "gloo":
        return "gloo"
    if requested == "nccl":
        if gpu_count == 0:
            raise UsageError(
                "--backend nccl needs CUDA GPUs and none are visible; use --backend gloo"
            )
        if not nccl_available:
            raise UsageError("--backend nccl: this torch build has no NCCL; use --backend gloo")
        return "nccl"
    # One spawned GPU rank makes a world of one: every bus bandwidth would be 0.
    enough = gpu_count >= (2 if spawning else 1)
    return "nccl" if enough and nccl_available else "gloo"


def default_nprocs(backend: str, gpu_count: int) -> int:
    return gpu_count if backend == "nccl" else 2


def run_label(cfg: SweepConfig) -> str:
    if set(cfg.ops) == {op.name for op in REGISTRY}:
        return "all"
    label = "-".join(cfg.ops)
    return label if len(label) <= 48 else label[:45] + "etc"


def make_run_dir(cfg: SweepConfig, backend: str) -> Path:
    """Create the run directory (empty); a non-empty existing one is refused."""
    if cfg.out_dir is not None:
        run_dir = Path(cfg.out_dir)
        if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
            raise UsageError(
                f"run directory {run_dir} already exists and is not empty; pick another --out"
            )
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create run directory {run_dir}: {exc.strerror}") from None
        if not os.access(run_dir, os.W_OK):
            raise UsageError(f"run directory {run_dir} is not writable")
        return run_dir
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(cfg.results_root) / f"{stamp}-{run_label(cfg)}-{backend}"
    for attempt in range(1, 1000):
        run_dir = base if attempt == 1 else base.with_name(f"{base.name}-{attempt}")
        try:
            run_dir.mkdir(parents=True)
            return run_dir
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(
                f"cannot create run directory under {cfg.results_root}: {exc.strerror}"
            ) from None
    raise UsageError(f"could not find a free run directory name next to {base}")


def run_sweep(cfg: SweepConfig) -> int:
    """Run a sweep to completion; returns the process exit code."""
    import torch.distributed as dist

    launch_env = detect()
    spawning = launch_env is None
    backend = resolve_backend(cfg.backend, spawning, _gpu_count(), dist.is_nccl_available())
    if launch_env is not None:
        return _run_launched(cfg, launch_env, backend)

    world_size = cfg.nprocs or default_nprocs(backend, _gpu_count())
    if backend == "nccl" and world_size > _gpu_count():
        raise UsageError(
            f"--nprocs {world_size} but only {_gpu_count()} GPU(s): NCCL needs one GPU per rank"
        )
    notes = validate_for_world(cfg, world_size, backend)
    run_dir = make_run_dir(cfg, backend)
    for note in notes:
        print(f"colbench: note: {note}", file=sys.stderr)
    return _spawn_and_wait(cfg, backend, world_size, run_dir)


def _spawn_and_wait(cfg: SweepConfig, backend: str, world_size: int, run_dir: Path) -> int:
    import torch.distributed as dist
    import torch.multiprocessing as mp

    store = dist.TCPStore(
        LOCAL_HOST,
        0,
        world_size,
        is_master=True,
        timeout=_dt.timedelta(seconds=cfg.timeout_s),
        wait_for_workers=False,
    )
    job = RankJob(
        cfg=cfg,
        backend=backend,
        world_size=world_size,
        launcher="colbench-spawn",
        run_dir=str(run_dir.resolve()),
        run_id=run_dir.name,
        store_host=LOCAL_HOST,
        store_port=store.port,
    )
    context = mp.start_processes(
        _spawned_rank, args=(job,), nprocs=world_size, join=False, start_method="spawn"
    )
    failure: str | None = None
    code = ExitCode.OK
    try:
        while not context.join(timeout=0.5):
            pass
    except KeyboardInterrupt:
        _terminate(context.processes)
        _finish_meta(run_dir, "interrupted", "interrupted by the user")
        print(f"colbench: interrupted; rows measured so far are in {run_dir}", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:  # torch raises ProcessExitedException / ProcessRaisedException
        failure = _first_failure(run_dir) or f"a rank failed: {exc}"
        code = ExitCode.RANK_FAILURE
    finally:
        del store
    if failure is not None:
        _finish_meta(run_dir, "failed", failure)
        print(f"colbench: {failure}", file=sys.stderr)
        print(f"colbench: rows measured before the failure are in {run_dir}", file=sys.stderr)
        return int(code)
    return _report_done(run_dir)


def _terminate(processes: list[Any]) -> None:
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + 5
    for proc in processes:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()


def _report_done(run_dir: Path) -> int:
    meta = metadata.read(run_dir)
    wrong = int(meta.get("wrong_total") or 0)
    rows = meta.get("rows", 0)
    print(f"colbench: {rows} rows in {run_dir}/results.csv", file=sys.stderr)
    if wrong:
        print(f"colbench: {wrong} wrong element(s): results are not trustworthy", file=sys.stderr)
        return int(ExitCode.DATA_ERROR)
    return int(ExitCode.OK)


def _finish_meta(run_dir: Path, status: str, error: str) -> None:
    try:
        meta = metadata.read(run_dir)
    except (OSError, json.JSONDecodeError):
        meta = {"run_id": run_dir.name}
    meta.update(status=status, error=error)
    metadata.write(run_dir, meta)


def _first_failure(run_dir: Path) -> str | None:
    """The earliest rank error recorded in the run directory, as one line."""
    reports = []
    for path in run_dir.glob("rank*.error.json"):
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    if not reports:
        return None
    first = min(reports, key=lambda r: r["time"])
    return (
        f"rank {first['rank']} on {first['host']} (pid {first['pid']}) failed during "
        f"{first['doing']}: {first['error']}"
    )


def _spawned_rank(local_rank: int, job: RankJob) -> None:
    in_flight = InFlight()
    try:
        rank_main(job, local_rank, local_rank, in_flight)
    except BaseException as exc:
        _record_failure(job, local_rank, in_flight, exc)
        # Exit without torch's traceback print: the parent reports one line.
        os._exit(int(ExitCode.RANK_FAILURE))


def _record_failure(job: RankJob, rank: int, in_flight: InFlight, exc: BaseException) -> None:
    error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    report = {
        "rank": rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "doing": in_flight.describe(),
        "error": error[:500],
        "time": time.time(),
    }
    if job.run_dir is None:
        print(
            f"colbench: rank {rank} on {report['host']} (pid {report['pid']}) failed during "
            f"{report['doing']}: {report['error']}",
            file=sys.stderr,
        )
        return
    run_dir = Path(job.run_dir)
    (run_dir / f"rank{rank}.log").write_text(traceback.format_exc())
    (run_dir / f"rank{rank}.error.json").write_text(json.dumps(report))


def _device_for(backend: str, local_rank: int) -> Any:
    import torch

    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        return device
    return torch.device("cpu")


def _init_process_group(job: RankJob, rank: int, device: Any) -> None:
    import torch.distributed as dist

    timeout = _dt.timedelta(seconds=job.cfg.timeout_s)
    kwargs: dict[str, Any] = {"rank": rank, "world_size": job.world_size, "timeout": timeout}
    if job.backend == "nccl":
        # Eager NCCL init: the communicator exists (and fails) here, not on the first call.
        kwargs["device_id"] = device
    # store_host None: env:// (an external launcher's MASTER_ADDR, or torchrun's store).
    store = launch.rendezvous(
        job.store_host,
        job.store_port,
        rank,
        job.world_size,
        job.cfg.init_timeout_s,
        job.cfg.timeout_s,
    )
    dist.init_process_group(job.backend, store=store, **kwargs)


def _device_name(device: Any) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def rank_main(job: RankJob, rank: int, local_rank: int, in_flight: InFlight) -> None:
    """One rank's whole life: join the group, run the plan, leave."""
    import torch.distributed as dist

    from colbench.timing import CudaEventTimer, HostTimer

    cfg = job.cfg
    device = _device_for(job.backend, local_rank)
    in_flight.phase = "rendezvous"
    _init_process_group(job, rank, device)
    try:
        in_flight.phase = "setup"
        ident = (rank, socket.gethostname(), os.getpid(), _device_name(device), launch.node_id())
        idents: list[Any] = [None] * job.world_size
        dist.all_gather_object(idents, ident)
        # Node labels, not bare host names: namespaces and containers share a host name.
        hosts = launch.node_labels([str(i[4]) for i in idents])
        subgroup = split_world(cfg.group_size, job.world_size, rank) if cfg.group_size else None
        info = RunInfo(
            run_id=job.run_id,
            backend=job.backend,
            device_name=_device_name(device),
            world_size=job.world_size,
            nnodes=len({i[4] for i in idents}),
            groups=subgroup.count if subgroup else 1,
        )
        timer = CudaEventTimer() if device.type == "cuda" else HostTimer()
        work = plan(cfg, info.group_size, job.backend)
        if rank != 0 or job.run_dir is None:
            RankBench(cfg, info, rank, device, timer, None, in_flight, subgroup).run(work)
            return
        run_dir = Path(job.run_dir)
        meta = metadata.collect(
            run_id=job.run_id,
            config=cfg.to_dict(),
            launcher=job.launcher,
            backend=job.backend,
            world_size=job.world_size,
            hosts=hosts,
            devices=[str(i[3]) for i in idents],
            group_size=info.group_size,
        )
        metadata.write(run_dir, meta)
        writer = RowWriter(run_dir / "results.csv")
        try:
            with progress_bar(count_units(work), cfg.progress) as hooks:
                sink = TableSink(writer.write, cfg.table, warn=hooks.warn, advance=hooks.advance)
                sink.header(
                    run_header(
                        ops=cfg.ops,
                        backend=job.backend,
                        world_size=job.world_size,
                        nnodes=info.nnodes,
                        device=info.device_name,
                        warmup=cfg.warmup,
                        iters=cfg.iters,
                        average=cfg.average,
                        check=cfg.check,
                        seed=cfg.seed,
                        ranks=[(i[0], h, i[2], i[3]) for i, h in zip(idents, hosts, strict=True)],
                        groups=info.groups,
                    )
                )
                started = time.time()
                RankBench(cfg, info, rank, device, timer, sink, in_flight, subgroup).run(work)
                sink.close()
        finally:
            writer.close()
        meta.update(
            status="complete",
            rows=sink.rows_written,
            wrong_total=sink.wrong_total,
            duration_s=round(time.time() - started, 3),
        )
        metadata.write(run_dir, meta)
    finally:
        in_flight.phase = "shutdown"
        dist.destroy_process_group()


def _run_launched(cfg: SweepConfig, env: LaunchEnv, backend: str) -> int:
    """Join a job an external launcher started: this process is one rank."""
    notes = validate_for_world(cfg, env.world_size, backend)
    preflight.check(env, backend, _gpu_count())
    # torch's env:// reads these; Slurm and MPI jobs get them from detect().
    launch.export(env)
    run_dir: Path | None = None
    if env.rank == 0:
        run_dir = make_run_dir(cfg, backend)
        for note in notes:
            print(f"colbench: note: {note}", file=sys.stderr)
    job = RankJob(
        cfg=cfg,
        backend=backend,
        world_size=env.world_size,
        launcher=env.launcher,
        run_dir=str(run_dir.resolve()) if run_dir else None,
        run_id=run_dir.name if run_dir else "",
    )
    in_flight = InFlight()
    # Only rank 0 speaks: the others print nothing but their own errors.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        rank_main(job, env.rank, env.local_rank, in_flight)
    except KeyboardInterrupt:
        if run_dir is not None:
            _finish_meta(run_dir, "interrupted", "interrupted by the user")
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:
        message = (
            f"rank {env.rank} on {socket.gethostname()} (pid {os.getpid()}) failed during "
            f"{in_flight.describe()}: {type(exc).__name__}: {exc}"
        )
        if run_dir is not None:
            _finish_meta(run_dir, "failed", message)
        raise RankFailure(message) from None
    return _report_done(run_dir) if run_dir is not None else int(ExitCode.OK)
