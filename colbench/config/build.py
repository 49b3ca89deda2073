"""Options to a checked :class:`colbench.config.model.SweepConfig`: what the CLI and YAML
suites give (:class:`colbench.config.options.SweepOptions`) is converted, then validated
(:mod:`colbench.config.validate`), so bad input fails before any rank starts."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from colbench.bench.ops.dtypes import parse_dtypes, parse_redops
from colbench.config.model import SweepConfig, default_timeout, parse_collectives, parse_split
from colbench.config.option_table import config_values
from colbench.config.options import SweepOptions
from colbench.config.options import table as options_table
from colbench.config.sizes import parse_size, parse_sizes, size_range
from colbench.config.validate import validate
from colbench.errors import UsageError


def resolve_sizes(
    sizes: str | None,
    minbytes: str | None,
    maxbytes: str | None,
    factor: float | None,
    step: str | None,
) -> tuple[int, ...]:
    """Merge ``--sizes`` with the nccl-tests flags -b/-e/-f/-i into one size list.

    -b/-e mean what they mean in nccl-tests: without -f (or with -f 1) sizes step by -i,
    1M unless given. ``--sizes MIN-MAX`` is colbench's own range and doubles.
    """
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
    low = parse_size(minbytes) if minbytes is not None else None
    high = parse_size(maxbytes) if maxbytes is not None else None
    if low is None and high is None:
        return tuple(parse_sizes(DEFAULT_SIZES, factor, step_bytes))
    if factor is None and step_bytes is None:
        step_bytes = NCCL_TESTS_STEP_BYTES
    # nccl-tests defaults both ends to 32M; one given end alone means a single size.
    low = high if low is None else low
    high = low if high is None else high
    assert low is not None and high is not None
    return tuple(size_range(low, high, factor, step_bytes))


#: colbench's sizes when none are given (nccl-tests' are 32M only: -b 32M -e 32M).
DEFAULT_SIZES = "1K-16M"
#: nccl-tests' -i default: the step when -b/-e come without -f.
NCCL_TESTS_STEP_BYTES = 1024**2


def build(
    *,
    op: str,
    sizes: tuple[int, ...],
    dtype: str,
    redop: str,
    **kwargs: Any,
) -> SweepConfig:
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
    dtypes = parse_dtypes(dtype)
    redops = parse_redops(redop)
    cfg = SweepConfig.of(
        ops=tuple(c.name for c in collectives),
        sizes_bytes=tuple(sizes),
        dtypes=tuple(d.name for d in dtypes),
        redops=redops,
        **kwargs,
    )
    validate(cfg)
    return cfg


def from_options(opts: SweepOptions, command_line: tuple[str, ...] = ()) -> SweepConfig:
    """Check and convert what the user gave (flags, a suite) into a SweepConfig.

    Each option becomes the config field it declares (colbench.config.option_table's
    ``config_values``); only what several options make together is written here: the
    sizes, and the timeouts that depend on the fabric. Raises UsageError, in the order a
    user fixes things: flags' own values first, then combinations (in :func:`build` and
    :func:`validate`).
    """
    values = config_values(options_table(), asdict(opts))
    for name in ("timeout_s", "init_timeout_s"):
        values[name] = default_timeout(
            values[name], opts.ranks_per_gpu, init=name == "init_timeout_s"
        )
    if opts.init_only:
        # A set-up is timed alone: no other world's turn beside it (interleaving), and
        # no probe world, which records NCCL's choice for collectives not run here.
        values.update(interleave=False, nccl_probe=False)
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
