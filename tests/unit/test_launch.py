"""Launcher detection from explicit environment dicts (colbench.launch.detect)."""

from __future__ import annotations

import pytest

from colbench.errors import UsageError
from colbench.launch import LaunchEnv, detect, free_port

MASTER = {"MASTER_ADDR": "node0", "MASTER_PORT": "29500"}


def test_empty_environment_means_spawn() -> None:
    assert detect(env={}) is None
    assert detect(env={"PATH": "/usr/bin", "HOME": "/root"}) is None


def test_torchrun() -> None:
    env = {
        "RANK": "3",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "TORCHELASTIC_RUN_ID": "abc",
        **MASTER,
    }
    assert detect(env=env) == LaunchEnv("torchrun", 3, 8, 1, 2, "node0", 29500)


def test_plain_env_without_torchelastic() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", **MASTER}
    got = detect(env=env)
    assert got is not None
    assert got.launcher == "env"
    assert (got.rank, got.world_size, got.local_rank) == (0, 2, 0)
    assert got.local_world_size is None


def test_local_rank_defaults_to_zero() -> None:
    got = detect(env={"RANK": "1", "WORLD_SIZE": "2", **MASTER})
    assert got is not None and got.local_rank == 0


def test_open_mpi() -> None:
    env = {
        "OMPI_COMM_WORLD_RANK": "5",
        "OMPI_COMM_WORLD_SIZE": "6",
        "OMPI_COMM_WORLD_LOCAL_RANK": "2",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "3",
        **MASTER,
    }
    assert detect(env=env) == LaunchEnv("openmpi", 5, 6, 2, 3, "node0", 29500)


def test_mpich() -> None:
    env = {"PMI_RANK": "1", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", **MASTER}
    got = detect(env=env)
    assert got is not None
    assert (got.launcher, got.rank, got.world_size, got.local_rank) == ("mpich", 1, 4, 1)


@pytest.mark.parametrize("step_var", ["SLURM_STEP_ID", "SLURM_STEPID"])
def test_slurm_under_srun(step_var: str) -> None:
    env = {
        "SLURM_PROCID": "7",
        "SLURM_NTASKS": "16",
        "SLURM_LOCALID": "3",
        "SLURM_NTASKS_PER_NODE": "4(x4)",
        step_var: "0",
        **MASTER,
    }
    assert detect(env=env) == LaunchEnv("slurm", 7, 16, 3, 4, "node0", 29500)


def test_slurm_batch_script_without_a_step_is_not_a_launch() -> None:
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "16", "SLURM_JOB_ID": "42", **MASTER}
    assert detect(env=env) is None


def test_torchrun_inside_slurm_wins() -> None:
    env = {
        "RANK": "2",
        "WORLD_SIZE": "4",
        "TORCHELASTIC_RUN_ID": "x",
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "1",
        "SLURM_STEP_ID": "0",
        **MASTER,
    }
    got = detect(env=env)
    assert got is not None
    assert (got.launcher, got.rank, got.world_size) == ("torchrun", 2, 4)


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({"RANK": "0"}, "WORLD_SIZE"),
        ({"WORLD_SIZE": "2"}, "RANK"),
        ({"OMPI_COMM_WORLD_RANK": "0"}, "OMPI_COMM_WORLD_SIZE"),
        ({"PMI_SIZE": "2"}, "PMI_RANK"),
        ({"SLURM_PROCID": "0", "SLURM_STEP_ID": "1"}, "SLURM_NTASKS"),
    ],
)
def test_partial_sets_name_what_is_missing(env: dict[str, str], missing: str) -> None:
    with pytest.raises(UsageError, match="incomplete") as info:
        detect(env={**env, **MASTER})
    assert missing in str(info.value)


@pytest.mark.parametrize(
    ("drop", "named"),
    [("MASTER_ADDR", "MASTER_ADDR"), ("MASTER_PORT", "MASTER_PORT")],
)
def test_more_than_one_rank_needs_the_master(drop: str, named: str) -> None:
    env = {"RANK": "1", "WORLD_SIZE": "2", **MASTER}
    del env[drop]
    with pytest.raises(UsageError) as info:
        detect(env=env)
    assert named in str(info.value)


def test_no_master_names_both_variables() -> None:
    with pytest.raises(UsageError) as info:
        detect(env={"PMI_RANK": "0", "PMI_SIZE": "2"})
    assert "MASTER_ADDR" in str(info.value) and "MASTER_PORT" in str(info.value)


def test_a_world_of_one_needs_no_master() -> None:
    got = detect(env={"RANK": "0", "WORLD_SIZE": "1"})
    assert got is not None
    assert (got.master_addr, got.master_port) == (None, None)


@pytest.mark.parametrize(("rank", "world"), [("2", "2"), ("5", "2"), ("-1", "2"), ("0", "0")])
def test_rank_outside_the_world(rank: str, world: str) -> None:
    with pytest.raises(UsageError, match="is not a rank") as info:
        detect(env={"RANK": rank, "WORLD_SIZE": world, **MASTER})
    assert "RANK" in str(info.value)


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("RANK", "zero"),
        ("WORLD_SIZE", "2.0"),
        ("WORLD_SIZE", ""),
        ("LOCAL_RANK", "x"),
        ("MASTER_PORT", "http"),
    ],
)
def test_non_integer_values_are_named(var: str, value: str) -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", **MASTER, var: value}
    with pytest.raises(UsageError, match="not an integer") as info:
        detect(env=env)
    assert var in str(info.value) and repr(value) in str(info.value)


def test_free_port_is_a_port() -> None:
    port = free_port()
    assert 0 < port < 65536
