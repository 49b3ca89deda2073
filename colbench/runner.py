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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from colbench import __version__, devices, launch, memory, metadata, preflight, supervise
from colbench import watchdog as hang_watchdog
from colbench.bench import (
    InFlight,
    RankBench,
    RunInfo,
    Work,
    _Fault,
    count_units,
    fit_to_memory,
    plan,
    plan_digest,
)
from colbench.config import SweepConfig, validate_for_world
from colbench.errors import ExitCode, RankFailure, UsageError
from colbench.groups import Groups, SideGroup, split_world
from colbench.launch import LaunchEnv, detect
from colbench.ops import REGISTRY
from colbench.report.console import TableSink, run_header
from colbench.report.progress import progress_bar
from colbench.results import SCHEMA_VERSION, STATUS_OOM, STATUS_UNSUPPORTED, RowWriter
from colbench.timing import Timer
from colbench.variants import Variant, environment, expand, ignored_by_backend

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
    #: Environment variables each rank sets before creating its process group.
    env: dict[str, str] = field(default_factory=dict)
    #: The environment variant these ranks were started with ("" when none).
    variant: str = ""
    #: Variables of the variant; every rank reports the values it sees into meta.json.
    variant_keys: tuple[str, ...] = ()


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_backend(requested: str, spawning: bool, gpu_count: int, nccl_available: bool) -> str:
    """``auto`` -> nccl when there is a GPU for it, else gloo; explicit nccl is checked.

    One GPU is enough, spawned or launched: a world of one rank is what nccl-tests
    ``-g 1`` measures on such a machine (see :func:`one_gpu_note`).
    """
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
    return "nccl" if gpu_count >= 1 and nccl_available else "gloo"


def default_nprocs(backend: str, gpu_count: int) -> int:
    """Ranks to spawn: one per GPU on NCCL (a single GPU gives a world of one), else 2."""
    return max(1, gpu_count) if backend == "nccl" else 2


def one_gpu_note(requested: str, backend: str, world_size: int) -> str | None:
    """Say so when ``auto`` chose a world of one: its bus bandwidths are mostly 0."""
    if requested != "auto" or backend != "nccl" or world_size != 1:
        return None
    return (
        "one GPU: measuring NCCL with 1 rank, as nccl-tests -g 1 does (bus bandwidth is 0 "
        "for collectives that move data between ranks); --backend gloo runs 2 CPU ranks"
    )


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
        if cfg.env_axes:
            raise UsageError(
                f"--env variants need fresh ranks per variant, which colbench can start only "
                f"itself; under {launch_env.launcher} export the variable before launching instead"
            )
        return _run_launched(cfg, launch_env, backend)

    world_size = cfg.nprocs or default_nprocs(backend, _gpu_count())
    if backend == "nccl" and world_size > _gpu_count():
        raise UsageError(
            f"--nprocs {world_size} but only {_gpu_count()} GPU(s): NCCL needs one GPU per "
            f"rank; --backend gloo runs {world_size} ranks on the CPU"
        )
    notes = _checked_notes(cfg, world_size, backend)
    chosen = one_gpu_note(cfg.backend, backend, world_size)
    notes = notes + ([chosen] if chosen else [])
    run_dir = make_run_dir(cfg, backend)
    for note in notes:
        print(f"colbench: note: {note}", file=sys.stderr)
    return _run_variants(cfg, backend, world_size, run_dir)


def _checked_notes(cfg: SweepConfig, world_size: int, backend: str) -> list[str]:
    """Validation that needs the world size; refuses a sweep that would measure nothing."""
    notes = validate_for_world(cfg, world_size, backend)
    n = cfg.group_size or world_size
    if count_units(plan(cfg, n, backend)) == 0:
        raise UsageError(
            f"nothing to run: at {n} ranks every size leaves less than one 16-byte "
            "chunk per rank; use larger sizes"
        )
    return notes


def loopback_interface() -> str:
    """Name of the loopback interface (lo on Linux, lo0 on macOS)."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        names = []
    return next((n for n in names if n.startswith("lo")), "lo")


def rank_environment(
    cfg: SweepConfig, backend: str, run_dir: Path, spawning: bool
) -> dict[str, str]:
    """Variables every rank sets before its process group exists."""
    env: dict[str, str] = {}
    if spawning and "GLOO_SOCKET_IFNAME" not in os.environ:
        # A single-node run must not listen on the machine's public interfaces.
        env["GLOO_SOCKET_IFNAME"] = loopback_interface()
    if cfg.debug and backend == "nccl":
        # torch's NCCL flight recorder: keep the last collectives and dump them when a
        # collective times out, one file per rank in the run directory.
        env.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
        env.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
        env.setdefault("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", str(run_dir / "nccl_trace_rank_"))
    return env


def start_method(backend: str) -> str:
    """How ranks are started: forked on CPU, spawned with CUDA.

    A forked rank inherits the parent's imported torch, so it is ready in milliseconds
    instead of re-importing torch (seconds on a small machine). CUDA cannot be used
    in a forked child, so GPU ranks are spawned; so is every rank where fork is not
    the platform's safe default.
    """
    return "fork" if backend == "gloo" and sys.platform.startswith("linux") else "spawn"


def _listen_loopback() -> socket.socket:
    """A listening socket on 127.0.0.1 for the store: TCPStore alone binds every interface."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((LOCAL_HOST, 0))
    sock.listen(1024)
    return sock


def _spawn_and_wait(
    cfg: SweepConfig, backend: str, world_size: int, run_dir: Path, variant: Variant | None = None
) -> int:
    import torch.multiprocessing as mp

    listener = _listen_loopback()
    job = RankJob(
        cfg=cfg,
        backend=backend,
        world_size=world_size,
        launcher="colbench-spawn",
        run_dir=str(run_dir.resolve()),
        run_id=run_dir.name,
        store_host=LOCAL_HOST,
        store_port=int(listener.getsockname()[1]),
        env=rank_environment(cfg, backend, run_dir, spawning=True),
        variant=variant.name if variant else "",
        variant_keys=variant.keys if variant else (),
    )
    with supervise.StopSignals() as stop:
        started = time.monotonic()
        # Ranks first, store second: the store serves from a thread of its own, and a rank
        # forked while that thread holds a lock (the allocator's, stdio's, the loader's,
        # torch's) inherits the lock held and waits on it for ever. Their connections
        # queue on the listening socket until the store takes it over.
        context = mp.start_processes(
            _spawned_rank,
            args=(job,),
            nprocs=world_size,
            join=False,
            start_method=start_method(backend),
        )
        try:
            store = _serve_store(listener, world_size, cfg.timeout_s)
        except BaseException:
            supervise.stop_processes(context.processes)
            raise
        watch = supervise.StartupWatch(
            deadline=started + cfg.init_timeout_s + supervise.STARTUP_GRACE_S,
            arrived=lambda: launch.arrived_ranks(store, world_size),
            world_size=world_size,
        )
        exit_codes = supervise.wait_for_ranks(context.processes, stop, watch)
        if stop.received is not None:
            supervise.stop_processes(context.processes)
            return _report_interrupted(run_dir, stop)
    if exit_codes is None:
        _tidy_logs(run_dir)
        return _report_done(run_dir)
    pids = dict(enumerate(context.pids()))
    failure = supervise.diagnose(
        exit_codes,
        supervise.read_reports(run_dir),
        supervise.read_progress(store, world_size),
        supervise.hostname(),
        pids,
        cfg.timeout_s,
    )
    failure = watch.verdict(failure, pids, cfg.init_timeout_s, time.monotonic() - started)
    listener.close()
    return _report_failure(run_dir, failure)


def _report_interrupted(run_dir: Path, stop: supervise.StopSignals) -> int:
    name = supervise.signal_name(stop.received or signal.SIGINT)
    _finish_meta(
        run_dir, "interrupted", {"error": f"interrupted by {name}", "exit_code": stop.exit_code}
    )
    print(
        f"colbench: interrupted by {name}; {_rows_kept(run_dir)} rows kept in {run_dir}",
        file=sys.stderr,
    )
    return stop.exit_code


def _report_failure(run_dir: Path, failure: supervise.Failure) -> int:
    if failure.exit_code == ExitCode.USAGE:
        _finish_meta(run_dir, "refused", failure.meta())
        raise UsageError(failure.message)
    _finish_meta(run_dir, "failed", failure.meta())
    print(f"colbench: {failure.message}", file=sys.stderr)
    print(
        f"colbench: {_rows_kept(run_dir)} rows measured before the failure are in {run_dir}; "
        "rank logs: rank*.log there",
        file=sys.stderr,
    )
    return failure.exit_code


def _serve_store(listener: socket.socket, world_size: int, timeout_s: float) -> Any:
    """The parent's TCPStore, serving on ``listener`` (connections already queued there)."""
    import torch.distributed as dist

    return dist.TCPStore(
        LOCAL_HOST,
        int(listener.getsockname()[1]),
        world_size,
        is_master=True,
        timeout=_dt.timedelta(seconds=timeout_s),
        wait_for_workers=False,
        master_listen_fd=listener.fileno(),
    )


def _rows_kept(run_dir: Path) -> int:
    try:
        with open(run_dir / "results.csv", encoding="utf-8") as f:
            return max(0, sum(1 for _ in f) - 1)
    except OSError:
        return 0


def _tidy_logs(run_dir: Path) -> None:
    """Empty rank logs of a clean run say nothing: remove them."""
    for log in run_dir.glob("rank*.log"):
        if log.stat().st_size == 0:
            log.unlink()


def _report_done(run_dir: Path) -> int:
    meta = metadata.read(run_dir)
    wrong = int(meta.get("wrong_total") or 0)
    rows = meta.get("rows", 0)
    print(f"colbench: {rows} rows in {run_dir}/results.csv", file=sys.stderr)
    if wrong:
        print(f"colbench: {wrong} wrong element(s): results are not trustworthy", file=sys.stderr)
        return int(ExitCode.DATA_ERROR)
    if meta.get("rows_oom"):
        print(
            f"colbench: {meta['rows_oom']} row(s) could not allocate their buffers (status oom)",
            file=sys.stderr,
        )
        return int(ExitCode.DATA_ERROR)
    return int(ExitCode.OK)


def _finish_meta(run_dir: Path, status: str, fields: dict[str, Any]) -> None:
    try:
        meta = metadata.read(run_dir)
    except (OSError, json.JSONDecodeError):
        meta = {"run_id": run_dir.name, "schema_version": SCHEMA_VERSION}
    meta.update(status=status, **fields)
    metadata.write(run_dir, meta)


def _spawned_rank(local_rank: int, job: RankJob) -> None:
    supervise.die_with_parent()
    # Testing aid, COLBENCH_FAULT=RANK:start:hang: RANK stops here for good, like a rank
    # stuck before its first line; it still has the parent's SIGTERM handler, so only
    # SIGKILL ends it, as it would a rank stuck on a lock.
    if os.environ.get("COLBENCH_FAULT", "").split(":") == [str(local_rank), "start", "hang"]:
        while True:
            time.sleep(3600)
    # The parent decides what an interrupt means; ranks just get terminated.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A forked rank inherits the parent's SIGTERM handler; the parent's terminate()
    # must end it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.environ.update(job.env)
    if job.run_dir is not None:
        _divert_stderr(Path(job.run_dir) / f"rank{local_rank}.log", keep_python=local_rank == 0)
    in_flight = InFlight(rank=local_rank)
    try:
        rank_main(job, local_rank, local_rank, in_flight)
    except BaseException as exc:
        _record_failure(job, local_rank, in_flight, exc)
        # Exit without torch's traceback print: the parent reports one line.
        os._exit(int(ExitCode.RANK_FAILURE))
    exit_now(int(ExitCode.OK))


def exit_now(code: int) -> NoReturn:
    """End a rank that has finished cleanly, skipping the interpreter's teardown.

    Everything is on disk and the process group is gone by now, but torch's C++
    teardown at interpreter exit sometimes aborts a clean rank ("terminate called without
    an active exception", no Python frame left; about 1 run in 20 on a busy 2-core
    machine), and a SIGABRT would turn a complete run into a failed one.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _divert_stderr(log_path: Path, keep_python: bool) -> None:
    """Send the C++ layers' stderr (gloo and NCCL warnings) to the rank's log file.

    Rank 0 keeps Python's own stderr on the terminal for notes and the progress bar;
    the other ranks print nothing but through the parent.
    """
    terminal = os.dup(2)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    if keep_python:
        sys.stderr = os.fdopen(terminal, "w", buffering=1)
    else:
        os.close(terminal)
        sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)


def _record_failure(job: RankJob, rank: int, in_flight: InFlight, exc: BaseException) -> None:
    # Stamped (if rank_main did not already): the hang watchdog leaves this rank alone now.
    in_flight.failed(exc)
    text = str(exc).strip()
    error = f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
    kind = supervise.classify(exc)
    if kind == supervise.KIND_USAGE:
        error = text
    report = supervise.make_report(
        rank,
        in_flight.failed_during or in_flight.describe(),
        kind,
        error,
        in_flight.failed_at or time.time(),
    )
    if job.run_dir is None:
        print(
            f"colbench: rank {rank} on {report['host']} (pid {report['pid']}) failed during "
            f"{report['doing']}: {report['error']}",
            file=sys.stderr,
        )
        return
    run_dir = Path(job.run_dir)
    with open(run_dir / f"rank{rank}.log", "a", encoding="utf-8") as log:
        log.write(traceback.format_exc())
    supervise.write_report(run_dir, report)


def _device_for(backend: str, local_rank: int, local_world_size: int) -> Any:
    import torch

    if backend == "nccl":
        # The launcher's own count, not ``local_world_size``: that falls back to the world
        # size, which on several nodes over-counts the ranks sharing this node's GPUs.
        # Spawned ranks have none: local rank = rank, one GPU each (run_sweep checked).
        index = devices.pick_cuda_index(
            local_rank, memory.declared_local_world_size(), _gpu_count()
        )
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
        return device
    share_cpu_threads(local_world_size)
    return torch.device("cpu")


def share_cpu_threads(local_world_size: int) -> None:
    """Give each CPU rank its share of the host's cores for torch's intra-op threads.

    More threads than cores make every parallel region (data fill, verification) wait
    for a descheduled thread, milliseconds per tensor op, and idle OpenMP threads spin
    for a while after each region, stealing the core a collective is timed on.
    OMP_NUM_THREADS, when set, wins.
    """
    import torch

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world_size)))


def _init_process_group(
    job: RankJob, rank: int, device: Any, in_flight: InFlight | None = None
) -> Any:
    """Join the process group; returns the rendezvous store (for progress).

    With ``in_flight``, the hang watchdog is armed as the communicator starts: from then
    on a step that stops moving ends the rank with exit code 4 (--init-timeout for the
    start-up itself, which torch leaves unbounded on NCCL; --timeout after it).
    """
    import torch.distributed as dist

    timeout = _dt.timedelta(seconds=hang_watchdog.process_group_timeout_s(job.cfg.timeout_s))
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
    if in_flight is not None:
        in_flight.store = store
        in_flight.step(hang_watchdog.COMM_STARTUP)
        _arm_watchdog(job, in_flight)
        _Fault(rank, os.environ.get("COLBENCH_FAULT")).at_init()
    dist.init_process_group(job.backend, store=store, **kwargs)
    return store


def _arm_watchdog(job: RankJob, in_flight: InFlight) -> hang_watchdog.Watchdog:
    """Start the rank's hang watchdog (see :mod:`colbench.watchdog`)."""
    import torch.distributed as dist

    run_dir = Path(job.run_dir) if job.run_dir is not None else None
    launched = job.store_host is None
    connect = None
    host, port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
    if launched and host and port.isdigit():
        # A client of its own: the rank's store client may be held by the blocked call.
        def connect() -> Any:
            return dist.TCPStore(
                host,
                int(port),
                is_master=False,
                timeout=_dt.timedelta(seconds=hang_watchdog.EXCHANGE_S),
                wait_for_workers=False,
            )

    def on_verdict(failure: supervise.Failure) -> None:
        if run_dir is not None:
            _finish_meta(run_dir, "failed", failure.meta())
            print(
                f"colbench: {_rows_kept(run_dir)} rows measured before the failure are in "
                f"{run_dir}",
                file=sys.stderr,
            )

    return hang_watchdog.Watchdog(
        in_flight,
        world_size=job.world_size,
        timeout_s=job.cfg.timeout_s,
        init_timeout_s=job.cfg.init_timeout_s,
        run_dir=run_dir,
        launched=launched,
        connect=connect,
        on_verdict=on_verdict,
    ).start()


def make_timer(device_type: str, cuda_graph: bool, barrier: Callable[[], None]) -> Timer:
    """Host clock on CPU; CUDA events on GPU, around a replayed graph with --cuda-graph.

    ``barrier`` aligns the ranks between graph capture and the timed replays (a side
    group's barrier: the measured group carries nothing but the measured op).
    """
    from colbench.timing import CudaEventTimer, CudaGraphTimer, HostTimer

    if device_type != "cuda":
        return HostTimer()
    return CudaGraphTimer(barrier) if cuda_graph else CudaEventTimer()


def _device_name(device: Any) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _agreed_budget(cfg: SweepConfig, device: Any, world_size: int, side: SideGroup) -> int:
    """Per-rank buffer budget, the minimum over all ranks so every plan is the same."""
    import torch

    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
    local = memory.rank_budget_bytes(
        memory.local_world_size_from_env(world_size), cfg.memory_limit_bytes, free
    )
    return side.min_int(local)


@dataclass(frozen=True)
class Peer:
    """What every rank tells the others at start-up, in one gather."""

    digest: tuple[str, str]
    """The plan digest and colbench version: compared before anything else."""
    rank: int
    host: str
    pid: int
    device_name: str
    node: str
    env_seen: dict[str, str | None]
    gpu_uuid: str
    """The GPU's physical identity ("" on CPU or when unknown)."""


def _meet_peers(side: SideGroup, me: Peer) -> list[Peer]:
    """Gather every rank's :class:`Peer`; stop with one message if plans differ.

    This is the first collective after the side group exists, so ranks started with
    different sweeps are told so before any of them waits in a collective the others
    will never call.
    """
    peers: list[Peer] = side.gather_objects(me)
    differing = [p.rank for p in peers if p.digest != peers[0].digest]
    if differing:
        raise UsageError(
            f"ranks disagree on the sweep: rank(s) {', '.join(map(str, differing))} planned "
            "different collectives than rank 0 (different arguments or colbench versions?)"
        )
    return peers


def _measurement_warnings(cfg: SweepConfig, backend: str) -> list[str]:
    warnings = []
    if os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL":
        warnings.append(
            "TORCH_DISTRIBUTED_DEBUG=DETAIL is set: it checks every collective and slows them "
            "several-fold; unset it for real measurements"
        )
    if cfg.debug and backend == "nccl":
        warnings.append(
            "--debug: torch's NCCL flight recorder records every collective, which adds host "
            "time to each call; measure without --debug for numbers to compare"
        )
    return warnings


def _fit_plan(
    cfg: SweepConfig, work: list[Work], device: Any, world_size: int, side: SideGroup
) -> tuple[list[Work], list[str]]:
    if cfg.memory_check == "off":
        return work, []
    budget = _agreed_budget(cfg, device, world_size, side)
    fitted, notes = fit_to_memory(work, budget, cfg.rotate)
    if notes and cfg.memory_check == "refuse":
        raise UsageError(f"not enough memory: {notes[0]} (--memory-check skip runs what fits)")
    return fitted, [f"{note}; skipped" for note in notes]


def rank_main(job: RankJob, rank: int, local_rank: int, in_flight: InFlight) -> None:
    """One rank's whole life: join the group, run the plan, leave."""
    import torch.distributed as dist

    cfg = job.cfg
    device = _device_for(job.backend, local_rank, memory.local_world_size_from_env(job.world_size))
    in_flight.phase = "rendezvous"
    in_flight.store = _init_process_group(job, rank, device, in_flight)
    try:
        in_flight.step("setup")
        # Every group gets torch's timeout a little later than colbench's own, so the
        # hang watchdog names the stuck ranks before torch aborts or one rank raises.
        group_timeout_s = hang_watchdog.process_group_timeout_s(cfg.timeout_s)
        side = SideGroup.create(job.world_size, group_timeout_s)
        group_size = cfg.group_size or job.world_size
        work = plan(cfg, group_size, job.backend)
        me = Peer(
            digest=(plan_digest(cfg, work), __version__),
            rank=rank,
            host=socket.gethostname(),
            pid=os.getpid(),
            device_name=_device_name(device),
            node=launch.node_id(),
            # Proof, kept in meta.json, that every rank started with its variant's values.
            env_seen={k: os.environ.get(k) for k in job.variant_keys},
            gpu_uuid=devices.gpu_uuid(device) if device.type == "cuda" else "",
        )
        peers = _meet_peers(side, me)
        # Two ranks on one GPU (CUDA_VISIBLE_DEVICES set alike) would make NCCL fail
        # or share the GPU: refuse it, naming them.
        devices.check_distinct_gpus(
            {p.rank: p.gpu_uuid for p in peers}, {p.rank: p.node for p in peers}
        )
        # Node labels, not bare host names: namespaces and containers share a host name.
        hosts = launch.node_labels([p.node for p in peers])
        subgroup = (
            split_world(cfg.group_size, job.world_size, rank, group_timeout_s)
            if cfg.group_size
            else None
        )
        groups = Groups(side, subgroup)
        info = RunInfo(
            run_id=job.run_id,
            backend=job.backend,
            device_name=me.device_name,
            world_size=job.world_size,
            nnodes=len({p.node for p in peers}),
            groups=subgroup.count if subgroup else 1,
            variant=job.variant,
        )
        timer = make_timer(device.type, cfg.cuda_graph, side.barrier)
        work, memory_notes = _fit_plan(cfg, work, device, job.world_size, side)
        if rank != 0 or job.run_dir is None:
            RankBench(cfg, info, rank, device, timer, None, groups, in_flight).run(work)
        else:
            notes = (_measurement_warnings(cfg, job.backend), memory_notes)
            _lead_run(job, info, peers, hosts, work, notes, (device, timer, groups, in_flight))
    except BaseException as exc:
        # Stamp the failure now: tearing down would close connections and make the
        # peers fail too, and the first failure must stay recognisable as the first.
        in_flight.failed(exc)
        raise
    # Only a clean run tears down: after a failure the process exits at once, and a
    # teardown could block on peers that are gone.
    in_flight.phase = "shutdown"
    dist.destroy_process_group()


def _lead_run(
    job: RankJob,
    info: RunInfo,
    peers: list[Peer],
    hosts: list[str],
    work: list[Work],
    notes: tuple[list[str], list[str]],
    bench_args: tuple[Any, Timer, Groups, InFlight],
) -> None:
    """Rank 0's share: the same loop as every rank, plus meta.json, the CSV and the table.

    ``notes``: warnings about the measurement (also in the table's header), and notes
    on sizes skipped for memory.
    """
    cfg = job.cfg
    device, timer, groups, in_flight = bench_args
    warnings, memory_notes = notes
    run_dir = Path(job.run_dir or ".")
    meta = metadata.collect(
        run_id=job.run_id,
        config=cfg.to_dict(),
        launcher=job.launcher,
        backend=job.backend,
        world_size=job.world_size,
        hosts=hosts,
        devices=[p.device_name for p in peers],
        pids=[p.pid for p in peers],
        group_size=info.group_size,
    )
    meta.update(warnings=warnings + memory_notes, plan_digest=peers[0].digest[0])
    if job.variant_keys:
        meta.update(variant=job.variant, env_seen_by_rank=[p.env_seen for p in peers])
    metadata.write(run_dir, meta)
    writer = RowWriter(run_dir / "results.csv")
    try:
        with progress_bar(count_units(work) * cfg.repeat, cfg.progress) as hooks:
            for line in warnings:
                hooks.warn(f"colbench: warning: {line}")
            for line in memory_notes:
                hooks.warn(f"colbench: note: {line}")
            sink = TableSink(writer.write, cfg.table, warn=hooks.warn, advance=hooks.advance)
            sink.header(
                ([f"# variant {job.variant}"] if job.variant else [])
                + [f"# warning: {line}" for line in warnings]
                + run_header(
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
                    ranks=[
                        (p.rank, h, p.pid, p.device_name) for p, h in zip(peers, hosts, strict=True)
                    ],
                    groups=info.groups,
                )
            )
            started = time.time()
            RankBench(cfg, info, 0, device, timer, sink, groups, in_flight).run(work)
            sink.close()
    finally:
        writer.close()
    meta.update(
        status="complete",
        rows=sink.rows_written,
        rows_oom=sink.status_counts.get(STATUS_OOM, 0),
        # Expected under a variant such as NCCL_ALGO=Tree: counted, not an error.
        rows_unsupported=sink.status_counts.get(STATUS_UNSUPPORTED, 0),
        wrong_total=sink.wrong_total,
        duration_s=round(time.time() - started, 3),
    )
    metadata.write(run_dir, meta)


def _run_launched(cfg: SweepConfig, env: LaunchEnv, backend: str) -> int:
    """Join a job an external launcher started: this process is one rank."""
    notes = _checked_notes(cfg, env.world_size, backend)
    preflight.check(env, backend, _gpu_count())
    # torch's env:// reads these; Slurm and MPI jobs get them from detect().
    launch.export(env)
    if env.local_world_size is not None:
        # What the GPU pick and the memory budget read (Slurm's count is computed).
        os.environ.setdefault("LOCAL_WORLD_SIZE", str(env.local_world_size))
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
    # Each rank publishes its progress under its own rank, for the hang verdict.
    in_flight = InFlight(rank=env.rank)
    # Only rank 0 speaks: the others print nothing but their own errors.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        rank_main(job, env.rank, env.local_rank, in_flight)
    except UsageError:
        raise
    except KeyboardInterrupt:
        if run_dir is not None:
            _finish_meta(run_dir, "interrupted", {"error": "interrupted by the user"})
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:
        in_flight.failed(exc)
        message = (
            f"rank {env.rank} on {socket.gethostname()} (pid {os.getpid()}) failed during "
            f"{in_flight.describe()}: {type(exc).__name__}: {exc}"
        )
        if run_dir is not None:
            _finish_meta(run_dir, "failed", {"failed_rank": env.rank, "error": message})
        code = exc.exit_code if isinstance(exc, RankFailure) else None
        raise RankFailure(message, code) from None
    exit_now(_report_done(run_dir) if run_dir is not None else int(ExitCode.OK))


def _run_variants(cfg: SweepConfig, backend: str, world_size: int, run_dir: Path) -> int:
    """Run every variant in freshly spawned ranks; all rows go to one results.csv."""
    variants = expand(cfg.env_axes)
    if len(variants) == 1 and not variants[0].env:
        code = _spawn_and_wait(cfg, backend, world_size, run_dir)
    else:
        for key in ignored_by_backend(cfg.env_axes, backend):
            print(
                f"colbench: warning: {key} has no effect on {backend}; its variants run anyway "
                "and should measure the same",
                file=sys.stderr,
            )
        code = _sweep_variants(cfg, backend, world_size, run_dir, variants)
    if cfg.plot and code in (ExitCode.OK, ExitCode.DATA_ERROR):
        _write_plots(run_dir)
    return code


def _sweep_variants(
    cfg: SweepConfig, backend: str, world_size: int, run_dir: Path, variants: tuple[Variant, ...]
) -> int:
    records: list[dict[str, Any]] = []
    worst = ExitCode.OK
    for index, variant in enumerate(variants, 1):
        print(f"colbench: variant {index}/{len(variants)}: {variant.name}", file=sys.stderr)
        # Spawned ranks inherit the parent's environment at start, before any process group.
        with environment(dict(variant.env)):
            code = _spawn_and_wait(cfg, backend, world_size, run_dir, variant)
        try:
            meta = metadata.read(run_dir)
        except (OSError, json.JSONDecodeError):
            meta = {"run_id": run_dir.name}
        meta.pop("variant", None)
        records.append(
            {
                "variant": variant.name,
                "env": dict(variant.env),
                "env_seen_by_rank": meta.pop("env_seen_by_rank", None),
                "status": meta.get("status"),
                "rows": meta.get("rows", 0),
                "wrong_total": meta.get("wrong_total", 0),
                "rows_oom": meta.get("rows_oom", 0),
                "duration_s": meta.get("duration_s"),
            }
        )
        meta.update(
            variants=records,
            **{
                key: sum(int(r[key] or 0) for r in records)
                for key in ("rows", "wrong_total", "rows_oom")
            },
        )
        metadata.write(run_dir, meta)
        if code not in (ExitCode.OK, ExitCode.DATA_ERROR):
            return code
        worst = max(worst, ExitCode(code))
    total = sum(int(r["rows"] or 0) for r in records)
    print(
        f"colbench: {total} rows of {len(variants)} variants in {run_dir}/results.csv",
        file=sys.stderr,
    )
    return int(worst)


def _write_plots(run_dir: Path) -> None:
    from colbench.report import plots

    try:
        paths = plots.write_run_plots(run_dir)
    except UsageError as exc:
        print(f"colbench: note: no plots: {exc}", file=sys.stderr)
        return
    print(f"colbench: plots: {', '.join(str(p) for p in paths)}", file=sys.stderr)
