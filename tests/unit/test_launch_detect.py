"""Launcher detection from each launcher's real variable set, whole and partial."""

from __future__ import annotations

import os
import socket

import pytest

from colbench.errors import UsageError
from colbench.host.launchers.detect import (
    SLURM_PORT_BASE,
    SLURM_PORT_SPAN,
    detect,
    expand_hostlist,
    expand_tasks_per_node,
    join_or_spawn,
    slurm_default_port,
)
from colbench.host.launchers.env import LaunchEnv, export, node_id, node_labels
from colbench.host.world import launch_lines

# What torchrun 2.x gives local rank 1 of node 1 in a 2 x 2 job.
TORCHRUN = {
    "RANK": "3",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "1",
    "GROUP_WORLD_SIZE": "2",
    "MASTER_ADDR": "head",
    "MASTER_PORT": "29400",
    "TORCHELASTIC_RUN_ID": "none",
    "TORCHELASTIC_USE_AGENT_STORE": "True",
}
# What srun gives task 5 of `srun -N 4 --ntasks-per-node 2` (node 2, local id 1).
SRUN = {
    "SLURM_JOB_ID": "81234",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "8",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "2",
    "SLURM_NNODES": "4",
    "SLURM_STEP_NUM_NODES": "4",
    "SLURM_STEP_TASKS_PER_NODE": "2(x4)",
    "SLURM_TASKS_PER_NODE": "2(x4)",
    "SLURM_JOB_NODELIST": "gpu-a[07-08],gpu-b[1,3]",
    "SLURM_STEP_NODELIST": "gpu-a[07-08],gpu-b[1,3]",
}
# What Open MPI's mpirun gives rank 9 of `mpirun -np 16` on 2 nodes.
OPENMPI = {
    "OMPI_COMM_WORLD_RANK": "9",
    "OMPI_COMM_WORLD_SIZE": "16",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "8",
    "OMPI_COMM_WORLD_NODE_RANK": "1",
    "MASTER_ADDR": "node01",
    "MASTER_PORT": "29500",
}
# What MPICH's Hydra mpiexec gives rank 2 of `mpiexec -n 4 -ppn 2`.
MPICH = {
    "PMI_RANK": "2",
    "PMI_SIZE": "4",
    "MPI_LOCALRANKID": "0",
    "MPI_LOCALNRANKS": "2",
    "MASTER_ADDR": "node01",
    "MASTER_PORT": "29500",
}


def without(env: dict[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in names}


def error(env: dict[str, str]) -> str:
    with pytest.raises(UsageError) as info:
        detect(env)
    return str(info.value)


def test_no_launcher_means_colbench_spawns() -> None:
    assert detect({"PATH": "/usr/bin", "MASTER_ADDR": "x"}) is None


def test_torchrun() -> None:
    found = detect(TORCHRUN)
    assert found == LaunchEnv(
        launcher="torchrun",
        rank=3,
        world_size=4,
        local_rank=1,
        local_world_size=2,
        master_addr="head",
        master_port=29400,
        node_rank=1,
        nnodes=2,
    )
    assert found.multi_node is True


def test_plain_env_without_torchelastic_is_env() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}
    env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1234"}
    found = detect(env)
    assert found is not None and found.launcher == "env"
    # Nothing says how many nodes: the preflight must not guess.
    assert found.nnodes is None and found.multi_node is None


@pytest.mark.parametrize(
    ("drop", "named"),
    [
        (("WORLD_SIZE",), "WORLD_SIZE missing"),
        (("RANK", "WORLD_SIZE"), "RANK, WORLD_SIZE missing"),
        (("LOCAL_RANK",), "LOCAL_RANK missing"),
        (("MASTER_ADDR",), "needs MASTER_ADDR"),
        (("MASTER_ADDR", "MASTER_PORT"), "needs MASTER_ADDR and MASTER_PORT"),
    ],
)
def test_partial_torchrun_set_names_what_is_missing(drop: tuple[str, ...], named: str) -> None:
    assert named in error(without(TORCHRUN, *drop))


def test_world_of_one_needs_no_master() -> None:
    found = detect({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"})
    assert found is not None and found.master_addr is None


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"RANK": "4"}, "RANK=4 is not a rank of WORLD_SIZE=4"),
        ({"RANK": "-1"}, "RANK=-1"),
        ({"LOCAL_RANK": "2"}, "LOCAL_RANK=2 is not a local rank of LOCAL_WORLD_SIZE=2"),
        ({"LOCAL_WORLD_SIZE": "8"}, "LOCAL_WORLD_SIZE=8 does not fit WORLD_SIZE=4"),
        ({"GROUP_WORLD_SIZE": "5"}, "5 nodes for 4 ranks"),
        ({"GROUP_RANK": "2"}, "node 2 of 2"),
        ({"WORLD_SIZE": "four"}, "WORLD_SIZE='four' is not an integer"),
        ({"MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not a TCP port"),
    ],
)
def test_contradictory_torchrun_set_is_refused(change: dict[str, str], named: str) -> None:
    assert named in error(TORCHRUN | change)


def test_srun() -> None:
    found = detect(SRUN)
    assert found is not None
    assert (found.launcher, found.rank, found.world_size) == ("slurm", 5, 8)
    assert (found.local_rank, found.local_world_size) == (1, 2)
    assert (found.node_rank, found.nnodes) == (2, 4)
    assert found.hosts == ("gpu-a07", "gpu-a08", "gpu-b1", "gpu-b3")
    # The first host of the node list hosts rank 0, so it is the master.
    assert found.master_addr == "gpu-a07"
    assert found.master_port == slurm_default_port(81234, 0)


def test_srun_tasks_agree_on_the_port_and_steps_differ() -> None:
    ports = {detect(SRUN | {"SLURM_PROCID": str(r)}).master_port for r in range(8)}  # type: ignore[union-attr]
    assert len(ports) == 1
    port = ports.pop()
    assert SLURM_PORT_BASE <= port < SLURM_PORT_BASE + SLURM_PORT_SPAN
    assert slurm_default_port(81234, 1) != port


def test_srun_respects_explicit_master() -> None:
    found = detect(SRUN | {"MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "29999"})
    assert found is not None and (found.master_addr, found.master_port) == ("10.0.0.9", 29999)


def test_srun_uneven_tasks_per_node() -> None:
    env = SRUN | {"SLURM_NTASKS": "7", "SLURM_STEP_TASKS_PER_NODE": "2(x3),1", "SLURM_NODEID": "3"}
    env |= {"SLURM_PROCID": "6", "SLURM_LOCALID": "0"}
    found = detect(env)
    assert found is not None and found.local_world_size == 1


@pytest.mark.parametrize(
    ("drop", "named"),
    [
        (("SLURM_NTASKS",), "SLURM_NTASKS missing"),
        (("SLURM_LOCALID",), "SLURM_LOCALID missing"),
        (("SLURM_PROCID",), "SLURM_PROCID missing"),
        (
            ("SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST"),
            "needs MASTER_ADDR to find rank 0",
        ),
        (("SLURM_JOB_ID",), "needs MASTER_PORT"),
    ],
)
def test_partial_srun_set_names_what_is_missing(drop: tuple[str, ...], named: str) -> None:
    assert named in error(without(SRUN, *drop))


def test_sbatch_without_srun_fails_fast_with_a_hint() -> None:
    batch = without(SRUN, "SLURM_STEP_ID")
    message = error(batch)
    assert "SLURM_NTASKS=8" in message and "srun colbench sweep" in message
    # Slurm's batch step has a special id: still not srun.
    assert "srun colbench" in error(batch | {"SLURM_STEP_ID": str(0xFFFFFFFB)})


def test_single_task_allocation_spawns_locally() -> None:
    assert detect(without(SRUN, "SLURM_STEP_ID") | {"SLURM_NTASKS": "1"}) is None


# A shell left with a torchrun worker's variables, and a step of one task inside an
# allocation (`salloc` then `srun --pty bash`): launchers' worlds of one.
STALE_SHELL = {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": "29500", "PATH": "/usr/bin"}  # fmt: skip
ONE_TASK_STEP = SRUN | {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0",
                        "SLURM_NODEID": "0", "SLURM_NNODES": "1", "SLURM_STEP_NUM_NODES": "1",
                        "SLURM_STEP_TASKS_PER_NODE": "1", "SLURM_TASKS_PER_NODE": "1",
                        "SLURM_JOB_NODELIST": "gpu-a07",
                        "SLURM_STEP_NODELIST": "gpu-a07"}  # fmt: skip


@pytest.mark.parametrize(
    ("env", "named"),
    [
        (STALE_SHELL, ("RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "MASTER_ADDR=127.0.0.1",
                       "MASTER_PORT=29500")),
        (ONE_TASK_STEP, ("SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0")),
    ],
    ids=["stale-shell", "one-task-step"],
)  # fmt: skip
def test_explicit_nprocs_beside_a_world_of_one_spawns_and_names_what_it_ignores(
    env: dict[str, str], named: tuple[str, ...]
) -> None:
    found, ignored = join_or_spawn(4, env)
    assert found is None
    assert ignored == named
    # Without --nprocs the launcher's world of one is joined, as before.
    joined, nothing = join_or_spawn(None, env)
    assert joined is not None and joined.world_size == 1 and nothing == ()


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (TORCHRUN, "torchrun's variables make this process rank 3 of 4 (RANK=3 WORLD_SIZE=4"),
        (SRUN, "srun's variables make this process rank 5 of 8 (SLURM_PROCID=5 SLURM_NTASKS=8"),
        (OPENMPI, "Open MPI's variables make this process rank 9 of 16"),
        (STALE_SHELL | {"WORLD_SIZE": "2"}, "the env:// variables make this process rank 0 of 2"),
    ],
    ids=["torchrun", "srun", "openmpi", "env"],
)
def test_explicit_nprocs_beside_a_larger_world_is_refused_in_one_line(
    env: dict[str, str], said: str
) -> None:
    with pytest.raises(UsageError) as info:
        join_or_spawn(2, env)
    message = str(info.value)
    assert message.startswith("--nprocs 2 asks colbench to start the ranks, but ")
    assert said in message and "drop --nprocs" in message and "\n" not in message
    # The launcher alone is joined.
    found, _ = join_or_spawn(None, env)
    assert found is not None and found.world_size > 1


def test_explicit_nprocs_without_a_launcher_spawns_and_ignores_nothing() -> None:
    assert join_or_spawn(4, {"PATH": "/usr/bin", "MASTER_PORT": "29500"}) == (None, ())


def test_openmpi() -> None:
    found = detect(OPENMPI)
    assert found is not None
    assert (found.launcher, found.rank, found.world_size, found.local_rank) == (
        "openmpi",
        9,
        16,
        1,
    )
    assert found.local_world_size == 8 and found.multi_node is True
    assert (found.master_addr, found.master_port) == ("node01", 29500)


def test_openmpi_without_master_says_how_to_pass_it() -> None:
    message = error(without(OPENMPI, "MASTER_ADDR", "MASTER_PORT"))
    assert "needs MASTER_ADDR and MASTER_PORT" in message
    assert "mpirun -x MASTER_ADDR" in message


def test_partial_openmpi_set() -> None:
    assert "OMPI_COMM_WORLD_SIZE missing" in error(without(OPENMPI, "OMPI_COMM_WORLD_SIZE"))
    assert "OMPI_COMM_WORLD_LOCAL_RANK missing" in error(
        without(OPENMPI, "OMPI_COMM_WORLD_LOCAL_RANK")
    )


def test_mpich() -> None:
    found = detect(MPICH)
    assert found is not None
    assert (found.launcher, found.rank, found.world_size) == ("mpich", 2, 4)
    assert (found.local_rank, found.local_world_size) == (0, 2)


def test_partial_mpich_set() -> None:
    assert "PMI_SIZE missing" in error(without(MPICH, "PMI_SIZE"))
    assert "MPI_LOCALRANKID missing" in error(without(MPICH, "MPI_LOCALRANKID"))
    assert "needs MASTER_ADDR" in error(without(MPICH, "MASTER_ADDR"))


def test_srun_pmi2_without_hydra_ids_is_slurm() -> None:
    env = SRUN | {"PMI_RANK": "5", "PMI_SIZE": "8"}
    found = detect(env)
    assert found is not None and found.launcher == "slurm" and found.local_rank == 1


def test_innermost_launcher_wins() -> None:
    # torchrun started by srun: the workers carry both sets; torchrun's describe them.
    found = detect(SRUN | TORCHRUN)
    assert found is not None and found.launcher == "torchrun" and found.rank == 3
    # mpirun inside an allocation launches through srun: the SLURM set is the daemon's.
    found = detect(SRUN | OPENMPI)
    assert found is not None and found.launcher == "openmpi" and found.rank == 9


def test_export_writes_the_env_rendezvous_variables() -> None:
    found = detect(SRUN)
    assert found is not None
    target: dict[str, str] = {}
    export(found, target)
    assert target == {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "gpu-a07",
        "MASTER_PORT": str(found.master_port),
    }
    # What we export is itself a complete, consistent env:// set.
    again = detect(target)
    assert again is not None and (again.rank, again.world_size) == (5, 8)


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node01", ["node01"]),
        ("a,b", ["a", "b"]),
        (
            "node[01-04,07],gpu-a[1-2]",
            ["node01", "node02", "node03", "node04", "node07", "gpu-a1", "gpu-a2"],
        ),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("n[9-11]", ["n9", "n10", "n11"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("node[1-2]-ib", ["node1-ib", "node2-ib"]),
        ("x[3],y", ["x3", "y"]),
    ],
)
def test_hostlist(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(
    "text", ["node[1-", "node]1", "node[3-1]", "node[a-b]", "", "a,,b", "n[[1]]"]
)
def test_bad_hostlist_names_the_variable(text: str) -> None:
    with pytest.raises(UsageError, match="SLURM_JOB_NODELIST"):
        expand_hostlist(text)


def test_tasks_per_node() -> None:
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("8") == [8]
    with pytest.raises(UsageError, match="SLURM_TASKS_PER_NODE"):
        expand_tasks_per_node("2x3")


def test_node_labels_tell_same_named_nodes_apart() -> None:
    assert node_labels(["a|b|1", "a|b|1", "c|d|1"]) == ["a", "a", "c"]
    # Two network namespaces of one host: one host name, two nodes.
    assert node_labels(["vm|b|1", "vm|b|2", "vm|b|1"]) == ["vm#0", "vm#1", "vm#0"]


def test_node_id_is_this_kernel_and_network_namespace() -> None:
    nid = node_id()
    host, _, netns = nid.split("|")
    assert host == socket.gethostname()
    assert int(netns) == os.stat("/proc/self/ns/net").st_ino
    assert node_id() == nid


def test_env_command_names_launcher_hosts_and_sizes() -> None:
    found = detect(SRUN)
    assert found is not None
    text = launch_lines(found)
    assert text.splitlines()[0] == "slurm"
    for expected in ("world size  8", "local world 2", "nodes       4", "gpu-a07, gpu-a08"):
        assert expected in text, text
    assert f"master      gpu-a07:{found.master_port}" in text
    env_only = detect({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"})
    assert env_only is not None
    assert "nodes       not given (counted when the ranks meet)" in launch_lines(env_only)


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({}, "default run   --backend "),
        ({"RANK": "x"}, "default run   refused: the launcher's environment above"),
        (
            {"GLOO_SOCKET_IFNAME": "nosuch0"},
            "default run   refused: GLOO_SOCKET_IFNAME=nosuch0: no interface nosuch0 on this host",
        ),
    ],
)
def test_env_says_what_a_run_would_be_refused_for(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], said: str
) -> None:
    from colbench.host.world import describe

    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GLOO_SOCKET_IFNAME", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert said in describe()
