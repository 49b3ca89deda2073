"""A sweep's options (:class:`colbench.config.options.SweepOptions`, from the CLI or a
suite) made into a checked :class:`colbench.config.model.SweepConfig`: converted, then
refused as one-line usage errors before any rank starts; what the world size decides, once
it is known. p2p and health check their launch and counts with the same functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from colbench.bench.ops.data import DTYPES, parse_dtypes, parse_redops, redop_supported
from colbench.config.contend import check_load
from colbench.config.model import (
    LaunchConfig,
    SweepConfig,
    default_timeout,
    parse_collectives,
    parse_split,
)
from colbench.config.option_table import config_values
from colbench.config.options import SweepOptions
from colbench.config.options import table as options_table
from colbench.config.sizes import format_size, parse_size, parse_sizes, size_range
from colbench.config.variants import cta_policy_axis
from colbench.direct.engine import DIRECT
from colbench.errors import UsageError

#: Time-sliced ranks on one GPU: beyond this many, every step is mostly waiting for a turn.
MAX_RANKS_PER_GPU = 16

RANKS_PER_GPU_NEEDS_NCCL = (
    "--ranks-per-gpu {k} shares each GPU among NCCL ranks; it needs --backend nccl (or auto "
    "on a GPU machine). gloo ranks run on the CPU: --nprocs sets how many"
)

#: The largest count, seed or rank an option takes: the ranks compute with 32-bit
#: counters and 64-bit element indices mixed with the seed, and a larger value is a typo.
MAX_COUNT = 2**31 - 1


def _positive_seconds(flag: str, value: float | None) -> None:
    # ``not > 0`` refuses NaN too; an infinite wait cannot be set on a process group.
    if value is not None and (not value > 0 or value == float("inf")):
        raise UsageError(f"{flag} must be positive, got {value:g} (a finite number of seconds)")


def _within(flag: str, value: int | None, least: int | None, most: int = MAX_COUNT) -> None:
    """``value`` (None: not given) at most ``most`` and at least ``least`` (None: any)."""
    if value is not None and value > most:
        raise UsageError(f"{flag} takes at most {most}, got {value}")
    if value is not None and least is not None and value < least:
        said = "0 or more" if least == 0 else f"at least {least}"
        raise UsageError(f"{flag} must be {said}, got {value}")


def validate_counts(*, iters: int, repeat: int, warmup: int, seed: int, root: int) -> None:
    """The counts a sweep and p2p share, by their flags' names."""
    if repeat == 0:
        # nccl-tests' -N 0 runs until stopped; a run here ends, so its rows can be read.
        raise UsageError(
            "--repeat must be at least 1, got 0 (nccl-tests' -N 0, forever, is not offered: "
            "give a count)"
        )
    # The root's own lower bound (-1, every root) is the sweep's: p2p takes none.
    counts = (("--iters", iters, 1), ("--repeat", repeat, 1), ("--warmup", warmup, 0))
    for flag, value, least in (*counts, ("--seed", seed, 0), ("--root", root, None)):
        _within(flag, value, least)


def validate_launch(launch: LaunchConfig) -> None:
    """Ranks and timeouts, for any task."""
    _within("--nprocs", launch.nprocs, 1)
    if not 1 <= launch.ranks_per_gpu <= MAX_RANKS_PER_GPU:
        raise UsageError(
            f"--ranks-per-gpu takes 1 to {MAX_RANKS_PER_GPU} ranks per GPU, "
            f"got {launch.ranks_per_gpu}"
        )
    _positive_seconds("--timeout", launch.timeout_s)
    _positive_seconds("--init-timeout", launch.init_timeout_s)
    if launch.ranks_per_gpu > 1 and launch.backend == "gloo":
        raise UsageError(RANKS_PER_GPU_NEEDS_NCCL.format(k=launch.ranks_per_gpu))


CUDA_GRAPH_NEEDS_NCCL = "--cuda-graph captures NCCL calls in a CUDA graph; it needs --backend nccl"


def validate(cfg: SweepConfig) -> None:
    """Checks that need no process group."""
    m = cfg.measure
    if not m.sizes_bytes:
        raise UsageError("no sizes to run")
    validate_counts(iters=m.iters, repeat=m.repeat, warmup=m.warmup, seed=m.seed, root=m.root)
    validate_launch(cfg.launch)
    if m.root < -1:
        raise UsageError(
            f"--root must be a rank (0 or more) or -1 (every rank in turn), got {m.root}"
        )
    if m.cuda_graph < 0:
        raise UsageError(f"--cuda-graph takes a number of graph launches, got {m.cuda_graph}")
    if m.cuda_graph and cfg.launch.backend == "gloo":
        # Also checked against the backend ``auto`` picks; this catches it before torch loads.
        raise UsageError(CUDA_GRAPH_NEEDS_NCCL)
    _positive_seconds("--time-budget", m.time_budget_s)
    if m.register != "none" and "nccl" not in m.engines:
        # torch.distributed's calls here never use a registered buffer.
        raise UsageError(
            f"--register {m.register} (nccl-tests' -R) registers buffers through "
            "NCCL's own API, which only the direct engine calls: add --engine nccl"
        )
    ceiling = cfg.output.ceiling_gbps
    if ceiling is not None and (not ceiling > 0 or ceiling == float("inf")):
        raise UsageError(f"--ceiling-gbps must be a positive rate in GB/s, got {ceiling:g}")
    if not 1 <= m.rotate <= 64:
        raise UsageError(f"--rotate takes 1 to 64 buffer sets, got {m.rotate}")
    if m.group_size is not None and m.group_size < 1:
        raise UsageError(f"--group-size must be at least 1, got {m.group_size}")
    if m.group_mod is not None and m.group_mod < 1:
        raise UsageError(f"--split mod:K needs K of 1 or more, got {m.group_mod}")
    if all(c.uses_redop for c in cfg.collectives()):
        reasons = [
            why for d in m.dtypes for r in m.redops if (why := redop_supported(r, DTYPES[d]))
        ]
        if len(reasons) == len(m.dtypes) * len(m.redops):
            raise UsageError(f"nothing to run: {reasons[0]}")
    if not any(cfg.placements_for(c) for c in cfg.collectives()):
        forms = "/".join(m.placements)
        raise UsageError(f"none of the chosen ops has a {forms} form; see colbench explain")
    _check_json_report(cfg)
    _check_init_only(cfg)


def _check_init_only(cfg: SweepConfig) -> None:
    """--init-only times one communicator of every rank: what splits the world or runs
    beside the collectives has nothing to act on, and is refused rather than ignored."""
    measure = cfg.measure
    if not measure.init_only:
        return
    for flag, given in (
        ("--group-size/--split", measure.group_size or measure.group_mod),
        ("--contend", measure.contend is not None),
        ("-J", cfg.output.output_file is not None),
        ("--cuda-graph", measure.cuda_graph),
    ):
        if given:
            raise UsageError(
                f"--init-only times the set-up of one communicator of every rank; {flag} "
                "acts on collectives, which it does not run: drop one of them"
            )


def _check_json_report(cfg: SweepConfig) -> None:
    """-J and -I: what nccl-tests' report can hold. It names no collective (nccl-tests is
    one binary per collective) and holds one measurement per size, in one world."""
    measure, launch = cfg.measure, cfg.launch
    if cfg.output.per_iter_timing and cfg.output.output_file is None:
        raise UsageError(
            "-I 1 adds per-iteration blocks to the -J report; give -J FILE.json too "
            "(colbench's table and results.csv always carry time_min_us..time_max_us)"
        )
    if cfg.output.per_iter_timing and measure.cuda_graph:
        raise UsageError(
            "-I 1 with --cuda-graph: a replayed graph has no per-call times (nccl-tests "
            "turns -I off with -G); drop one of them"
        )
    if cfg.output.output_file is None:
        return
    if len(measure.ops) > 1:
        raise UsageError(
            f"-J: nccl-tests' report names no collective (one binary per collective), so it "
            f"holds one --op; got {', '.join(measure.ops)}: run one sweep per op"
        )
    if measure.repeat > 1:
        raise UsageError(
            "-J: nccl-tests' report holds one measurement per size; --repeat "
            f"{measure.repeat} measures each {measure.repeat} times (its rows are in "
            "results.csv; -I 1 gives the report every iteration)"
        )
    if launch.env_axes or launch.interpreters or measure.contend is not None:
        raise UsageError(
            "-J: nccl-tests' report is one world's; --env, --python and --contend run "
            "several (one sweep per variant, each with its own -J)"
        )


def engine_refusal(engines: Sequence[str], backend: str) -> str | None:
    """Why this machine cannot run the engines (one line), or None. Asked in the parent,
    before any rank starts; imports nothing of nccl4py."""
    if DIRECT not in engines:
        return None
    if backend != "nccl":
        return (
            f"--engine nccl calls NCCL on GPUs, and this run's backend is {backend}: "
            "use --engine torch (the default) here"
        )
    from colbench.direct.nccl4py import missing

    return missing()


def validate_for_world(cfg: SweepConfig, world_size: int, backend: str) -> list[str]:
    """Checks that need the world size; returns warnings for combinations that will be skipped.
    With --group-size or --split, a group's size is what ops and roots are checked against."""
    if cfg.measure.contend is not None:
        check_load(cfg.measure.contend, cfg.measure, world_size, backend)
    engine_refused = engine_refusal(cfg.measure.engines, backend)
    if engine_refused is not None:
        raise UsageError(engine_refused)
    what = "world"
    if cfg.measure.group_size is not None:
        if world_size % cfg.measure.group_size:
            raise UsageError(
                f"--group-size {cfg.measure.group_size} does not divide the world size {world_size}"
            )
        what, world_size = "group", cfg.measure.group_size
    if cfg.measure.group_mod is not None:
        k = cfg.measure.group_mod
        if world_size % k:
            raise UsageError(
                f"--split mod:{k} needs a world size that is a multiple of {k}, got {world_size}"
            )
        what, world_size = "group", world_size // k
    if cfg.measure.root >= world_size and any(c.rooted for c in cfg.collectives()):
        raise UsageError(f"--root {cfg.measure.root} is not a rank of a {what} of {world_size}")
    if cfg.measure.cuda_graph and backend != "nccl":
        raise UsageError(CUDA_GRAPH_NEEDS_NCCL)
    notes: list[str] = []
    for coll in cfg.collectives():
        reason = coll.unsupported(world_size, backend)
        if reason:
            notes.append(f"skipping {coll.name}: {reason}")
            continue
        if cfg.measure.cuda_graph and not coll.graph_capturable:
            notes.append(f"skipping {coll.name}: a CUDA graph cannot capture it (--cuda-graph)")
            continue
        forms = {"out": "out-of-place", "in": "in-place"}
        missing = [forms[p] for p in cfg.measure.placements if p not in coll.placements]
        # With both placements asked for, the table's n/a columns say enough.
        if coll.sized and missing and not cfg.placements_for(coll):
            notes.append(f"skipping {coll.name}: torch has no {missing[0]} form of it")
        if coll.uses_redop:
            for d in cfg.measure.dtypes:
                for r in cfg.measure.redops:
                    why = redop_supported(r, DTYPES[d])
                    if why:
                        notes.append(f"skipping {coll.name} {d} {r}: {why}")
    if cfg.measure.splits != "uniform" and not any(c.splits_label for c in cfg.collectives()):
        notes.append(f"--splits {cfg.measure.splits} has no effect: no op measured takes it")
    if all(
        c.unsupported(world_size, backend) or not cfg.placements_for(c) for c in cfg.collectives()
    ):
        raise UsageError(f"nothing to run at {what} size {world_size}: " + "; ".join(notes))
    return notes


def resolve_sizes(
    sizes: str | None,
    minbytes: str | None,
    maxbytes: str | None,
    factor: float | None,
    step: str | None,
) -> tuple[int, ...]:
    """``--sizes`` or nccl-tests' -b/-e (with -f/-i) as one size list: -b/-e without -f (or
    with -f 1) step by -i, 1M unless given, as there; ``--sizes MIN-MAX`` doubles."""
    step_bytes = parse_size(step) if step is not None else None
    if factor is not None and factor < 1:
        raise UsageError(f"step factor must be a whole number of 1 or more, got {factor}")
    if factor == 1:
        # nccl-tests: a factor of 1 means "add -i each step".
        factor = None
        step_bytes = NCCL_TESTS_STEP_BYTES if step_bytes is None else step_bytes
    if sizes is not None:
        if minbytes is not None or maxbytes is not None:
            raise UsageError("give either --sizes or -b/--minbytes and -e/--maxbytes, not both")
        return tuple(parse_sizes(sizes, factor, step_bytes))
    if minbytes is None and maxbytes is None:
        return tuple(parse_sizes(DEFAULT_SIZES, factor, step_bytes))
    # nccl-tests defaults both ends to 32M: -b alone runs up to 32M, -e alone from 32M (and
    # is refused below it, as there).
    low = parse_size(minbytes) if minbytes is not None else NCCL_TESTS_BYTES
    high = parse_size(maxbytes) if maxbytes is not None else NCCL_TESTS_BYTES
    if low > high and None in (minbytes, maxbytes):
        given, default = ("-e", "-b") if minbytes is None else ("-b", "-e")
        raise UsageError(
            f"minimum size {format_size(low)} is larger than maximum size {format_size(high)} "
            f"(nccl-tests' default {default} is 32M): give {default} with {given}"
        )
    if factor is None and step_bytes is None:
        step_bytes = NCCL_TESTS_STEP_BYTES
    return tuple(size_range(low, high, factor, step_bytes))


#: colbench's sizes when none are given (nccl-tests' are 32M only: -b 32M -e 32M).
DEFAULT_SIZES = "1K-16M"
#: nccl-tests' -b and -e default: the end of the range not given.
NCCL_TESTS_BYTES = 32 * 1024**2
#: nccl-tests' -i default: the step when -b/-e come without -f.
NCCL_TESTS_STEP_BYTES = 1024**2


def build(*, op: str, sizes: tuple[int, ...], dtype: str, redop: str, **kwargs: Any) -> SweepConfig:
    """Validate user choices into a SweepConfig (raises UsageError)."""
    collectives = parse_collectives(op)
    if kwargs.get("cuda_graph") and op.strip() != "all":
        # Asked for by name, it cannot be quietly left out: refuse. (``all`` skips it.)
        named = [c.name for c in collectives if not c.graph_capturable]
        if named:
            raise UsageError(
                f"--cuda-graph cannot capture {named[0]}: it synchronises the host, which a "
                "CUDA graph cannot hold; run it without --cuda-graph"
            )
    cfg = SweepConfig.of(
        ops=tuple(c.name for c in collectives),
        sizes_bytes=tuple(sizes),
        dtypes=tuple(d.name for d in parse_dtypes(dtype)),
        redops=parse_redops(redop),
        **kwargs,
    )
    validate(cfg)
    return cfg


def from_options(opts: SweepOptions, command_line: tuple[str, ...] = ()) -> SweepConfig:
    """Check and convert what the user gave (flags, a suite) into a SweepConfig. Each option
    becomes its config field (``config_values``); here only what several make together: the
    sizes, and the timeouts that depend on the fabric. UsageErrors come in the order a user
    fixes things: flags' own values first, then combinations (:func:`build`)."""
    values = config_values(options_table(), asdict(opts))
    for name in ("timeout_s", "init_timeout_s"):
        values[name] = default_timeout(
            values[name], opts.ranks_per_gpu, init=name == "init_timeout_s"
        )
    if opts.init_only:
        # A set-up is timed alone: no other world's turn beside it (interleaving), and
        # no probe world, which records NCCL's choice for collectives not run here.
        values.update(interleave=False, nccl_probe=False)
    if opts.cta_policy is not None:
        values["env_axes"] = cta_policy_axis(values["env_axes"], opts.cta_policy)
    sizes = resolve_sizes(opts.sizes, opts.minbytes, opts.maxbytes, opts.factor, opts.step)
    groups = _groups(opts.group_size, opts.split)
    return build(sizes=sizes, command_line=command_line, **groups, **values)


def _groups(group_size: int | None, split: str | None) -> dict[str, Any]:
    """``--group-size`` or ``--split`` as the config's group_size and group_mod."""
    if split is None:
        return {"group_size": group_size, "group_mod": None}
    if group_size is not None:
        raise UsageError("give --split or --group-size, not both (--split div:K is --group-size K)")
    kind, k = parse_split(split)
    return (
        {"group_size": k, "group_mod": None}
        if kind == "div"
        else {"group_size": None, "group_mod": k}
    )
