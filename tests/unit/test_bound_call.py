"""ops.base.bound_call: the timed call is the hand-written loop's call, arguments and all."""

from __future__ import annotations

import functools

import pytest

from colbench.bench.ops.base import bound_call

DEFAULT_OP = object()


def collective(tensor: object, op: object = DEFAULT_OP, group: object = None) -> tuple:
    return tensor, op, group


def keyword_only(tensor: object, *, group: object = None) -> tuple:
    return tensor, group


def wrapped(*args: object, **kwargs: object) -> tuple:
    return args, kwargs


@pytest.mark.parametrize(
    ("fn", "args", "kwargs", "expected_args", "expected_keywords"),
    [
        # defaults given by keyword are left out, as a hand-written call leaves them
        (collective, ("t",), {"op": DEFAULT_OP, "group": None}, ("t",), {}),
        # a value that is not the default goes positionally, with what comes before it
        (collective, ("t",), {"group": "g"}, ("t", DEFAULT_OP, "g"), {}),
        (collective, ("t",), {"op": "max"}, ("t", "max"), {}),
        (keyword_only, ("t",), {"group": "g"}, ("t",), {"group": "g"}),
        (keyword_only, ("t",), {"group": None}, ("t",), {"group": None}),
        # a signature that hides its parameters keeps the call as given
        (wrapped, ("t",), {"group": "g"}, ("t",), {"group": "g"}),
    ],
)
def test_arguments_go_positionally_without_trailing_defaults(
    fn: object, args: tuple, kwargs: dict, expected_args: tuple, expected_keywords: dict
) -> None:
    call = bound_call(fn, *args, **kwargs)  # type: ignore[arg-type]
    assert isinstance(call, functools.partial)
    assert call.args == expected_args
    assert call.keywords == expected_keywords
    assert call() == fn(*args, **kwargs)  # type: ignore[operator]


def test_torch_all_reduce_binds_as_the_hand_loop_calls_it() -> None:
    """torch's collectives wrap a logging decorator; the signature is the wrapped one's."""
    import torch
    import torch.distributed as dist

    tensor = torch.ones(1)
    call = bound_call(dist.all_reduce, tensor, op=dist.ReduceOp.SUM, group=None)
    assert isinstance(call, functools.partial)
    assert call.func is dist.all_reduce
    assert call.args == (tensor,) and call.keywords == {}
