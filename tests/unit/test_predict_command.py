"""``colbench predict`` end to end on run directories written through the project's own
writer, with times a known model generated: exact recovery, the dropped point in the
output, --against, --max-error, --out and --plot, and every refusal (exit 2, one line)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from colbench.commands.predict import models
from colbench.commands.predict import report as files
from tests.conftest import run_main
from tests.unit.predict_runs import SIZES, TRUE, model_run

EIGHT_MIB = 8 << 20


def _two_thirds_rate(op: str, n: int, size: int, time: float) -> float:
    """The issue's all_gather at 2 ranks and 8 MiB, reading 2/3 of the link rate."""
    if (op, n, size) != ("all_gather", 2, EIGHT_MIB):
        return time
    link = models.terms(op, models.RING, n, 1, size).link_bytes
    return time + 0.5 * link * TRUE.beta_us_per_byte


@pytest.fixture
def fabric_runs(tmp_path: Path) -> dict[int, str]:
    return {
        n: str(model_run(tmp_path / f"r{n}", n, distort=_two_thirds_rate)) for n in (2, 3, 4, 6, 8)
    }


def test_fit_predict_check_write_and_draw(
    fabric_runs: dict[int, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, stdout, _ = run_main(
        capsys, "predict", fabric_runs[2], fabric_runs[3], fabric_runs[4],
        "--ranks", "64,512", "--sizes", "4K,1M", "--against", fabric_runs[6],
        fabric_runs[8], "--max-error", "1", "--out", str(out), "--plot",
    )  # fmt: skip
    assert code == 0, stdout
    # Which model each (op, algo) uses, and the fitted link: 0.05 us/B = 0.02 GB/s.
    assert "all_gather ring: ring: N-1 steps, (N-1)/N*S sent" in stdout
    fit_row = next(line for line in stdout.splitlines() if line.startswith("  all_gather     ring"))
    assert fit_row.split()[2:5] == ["300.0", "120.00", "0.02"]
    assert "dropped all_gather ring 2 ranks 8M" in stdout and "residual +33.3%" in stdout
    assert "largest |error| from 4K: 0.0% (all_gather," in stdout
    assert "no measured tree checks them" in stdout
    with open(out / "predict.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(files.PREDICT_TABLE.columns)
    # 2 targets x 2 sizes x (3 all_reduce algorithms + 1 all_gather), less all_gather of
    # 4K at 512 ranks: 8 B per rank, no whole 16-byte chunk, which a sweep skips too.
    assert len(rows) == 15
    assert "# all_gather at 512 ranks: 4K leave(s) no whole 16-byte chunk per rank" in stdout
    assert {r["requested_bytes"] for r in rows} == {"4096", "1048576"}
    ring64 = next(
        r for r in rows if (r["op"], r["algo"], r["world_size"], r["size_bytes"])
        == ("all_gather", "ring", "64", "1048576")
    )  # fmt: skip
    # 300 + 63*120 + 63/64 * 1 MiB * 0.05 = 300 + 7560 + 51609.6 = 59469.6 us
    assert float(ring64["time_us"]) == pytest.approx(59469.6, rel=1e-5)
    assert float(ring64["time_low_us"]) <= 59469.6 <= float(ring64["time_high_us"])
    with open(out / "against.csv", newline="") as f:
        against = list(csv.DictReader(f))
    assert {r["world_size"] for r in against} == {"6", "8"}
    assert max(abs(float(r["error_pct"])) for r in against) < 1e-3
    meta = json.loads((out / "meta.json").read_text())
    assert [d["size_bytes"] for f in meta["fits"] for d in f["dropped"]] == [EIGHT_MIB]
    assert (out / "predict.png").stat().st_size > 10_000


def test_max_error_exceeded_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [str(model_run(tmp_path / f"r{n}", n, ops=("all_gather",))) for n in (2, 3, 4)]

    def off(op: str, n: int, size: int, time: float) -> float:
        return time * 1.2 if size == 64 << 10 else time

    checked = str(model_run(tmp_path / "r6", 6, ops=("all_gather",), distort=off))
    code, stdout, err = run_main(
        capsys, "predict", *runs, "--against", checked, "--max-error", "15"
    )
    assert code == 1
    # predicted = measured / 1.2: error = 1/1.2 - 1 = -16.7%
    assert "largest |error| from 4K: 16.7% (all_gather, 64K, 6 ranks)" in stdout
    # A CI log shows why the job is red, on stderr, in one line.
    assert err.strip().splitlines() == [
        "colbench predict: FAIL: largest |error| from 4K 16.7% (all_gather, 64K, 6 ranks) "
        "exceeds --max-error 15%"
    ]
    code, _, err = run_main(capsys, "predict", *runs, "--against", checked, "--max-error", "17")
    assert code == 0 and "colbench predict: PASS: largest |error| from 4K 16.7%" in err
    # Below --min-size the row is not judged.
    code, _, _ = run_main(
        capsys, "predict", *runs, "--against", checked, "--max-error", "15", "--min-size", "128K"
    )
    assert code == 0
    # Nothing at or above --min-size: nothing judged is no pass.
    code, _, err = run_main(
        capsys, "predict", *runs, "--against", checked, "--max-error", "15", "--min-size", "1G"
    )
    assert code == 2 and "have none" in err


def test_min_size_judges_the_size_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A sweep's all_gather of 4K on 6 ranks measures 4032 B (672 B per rank): "from 4K
    # up" takes that row, and only sizes asked for below 4K are left out.
    runs = [str(model_run(tmp_path / f"r{n}", n, ops=("all_gather",))) for n in (2, 3, 4)]

    def off(op: str, n: int, size: int, time: float) -> float:
        return time * 1.25 if size == 4032 else time

    checked = str(
        model_run(
            tmp_path / "r6", 6, ops=("all_gather",), sizes=[2048, *SIZES[:3]],
            distort=off, as_laid_out=True,
        )
    )  # fmt: skip
    argv = ["predict", *runs, "--against", checked, "--max-error", "15", "--out", str(tmp_path)]
    code, stdout, _ = run_main(capsys, *argv)
    assert code == 1
    assert "largest |error| from 4K: 20.0% (all_gather, 3.94K, 6 ranks)" in stdout
    with open(tmp_path / "against.csv", newline="") as f:
        against = {int(r["requested_bytes"]): int(r["size_bytes"]) for r in csv.DictReader(f)}
    assert against == {2048: 2016, 4096: 4032, 8192: 8160, 16384: 16320}
    # Asked for from 8K: the 4032-B row is no longer judged.
    code, stdout, _ = run_main(capsys, *argv, "--min-size", "8K")
    assert code == 0 and "largest |error| from 8K: 0.0%" in stdout


def test_default_sizes_are_the_requests_at_the_targets_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Runs as a sweep writes them: all_gather of 4K measures 4096 B at 2 and 4 ranks and
    # 4080 B at 3. Predictions ask for each request once and report what 6 ranks measure.
    runs = [
        str(model_run(tmp_path / f"r{n}", n, ops=("all_gather",), as_laid_out=True))
        for n in (2, 3, 4)
    ]
    code, stdout, _ = run_main(capsys, "predict", *runs, "--ranks", "6", "--out", str(tmp_path))
    assert code == 0, stdout
    with open(tmp_path / "predict.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(int(r["requested_bytes"]) for r in rows) == SIZES
    sizes = {int(r["requested_bytes"]): int(r["size_bytes"]) for r in rows}
    assert sizes[4096] == 4032 and sizes[8192] == 8160 and sizes[1 << 20] == 1048512
    assert "1024K" in stdout and "e+0" not in stdout


def _off_at_4032(op: str, n: int, size: int, time: float) -> float:
    return time * 1.25 if size == 4032 else time


@pytest.mark.parametrize("dtype", ["float32", "float8_e4m3fn"])
def test_imported_runs_predict_each_size_once_and_judge_from_min_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dtype: str
) -> None:
    # Imported logs know only the measured size: all_gather "requests" of 4096 (2 and 4
    # ranks) and 4080 B (3 ranks) both measure 4032 B at 6 ranks, predicted once. A
    # dtype colbench cannot sweep (float8) is laid out all the same.
    def imported(n: int, **kw: Any) -> str:
        kw |= {"ops": ("all_gather",), "as_laid_out": True, "imported": True, "dtype": dtype}
        return str(model_run(tmp_path / f"i{n}", n, **kw))

    runs = [imported(n) for n in (2, 3, 4)]
    code, stdout, _ = run_main(capsys, "predict", *runs, "--ranks", "6,8", "--out", str(tmp_path))
    assert code == 0, stdout
    with open(tmp_path / "predict.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for n in ("6", "8"):
        sizes = [int(r["size_bytes"]) for r in rows if r["world_size"] == n]
        assert len(sizes) == len(set(sizes)) == len(SIZES), (n, sizes)
    assert {int(r["requested_bytes"]) for r in rows} == set(SIZES)
    # An imported 6-rank check: its 4032-B row is "from 4K" although it asked for 4032.
    checked = imported(6, distort=_off_at_4032)
    code, stdout, err = run_main(
        capsys, "predict", *runs, "--against", checked, "--max-error", "15"
    )
    assert code == 1 and "largest |error| from 4K: 20.0% (all_gather, 3.94K, 6 ranks)" in stdout
    assert "FAIL: largest |error| from 4K 20.0%" in err


def test_one_dtype_and_reduction_op_per_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Runs of float32 sum and bfloat16 sum (the bfloat16 link half as fast per byte) and,
    # at 3 ranks, float32 max too: pooled, the fit would be a model of none of them.
    slow = models.Parameters(TRUE.overhead_us, TRUE.alpha_us, 2 * TRUE.beta_us_per_byte, 0.0)
    runs = []
    for n in (2, 3, 4):
        runs.append(str(model_run(tmp_path / f"f{n}", n, ops=("all_reduce",))))
        runs.append(
            str(
                model_run(tmp_path / f"b{n}", n, ops=("all_reduce",), dtype="bfloat16", params=slow)
            )
        )
    runs.append(str(model_run(tmp_path / "m3", 3, ops=("all_reduce",), redop="max")))
    err = _refused(capsys, *runs)
    assert "all_reduce of several kinds (bfloat16 sum, float32 max, float32 sum)" in err
    assert "pick one with --dtype and --redop" in err
    # bf16 is bfloat16, as in sweep --dtype: one kind, fitted exactly (half the link rate).
    code, stdout, _ = run_main(capsys, "predict", *runs, "--dtype", "bf16", "--algo", "ring")
    assert code == 0, stdout
    fit_row = next(line for line in stdout.splitlines() if line.startswith("  all_reduce     ring"))
    assert fit_row.split()[2:5] == ["300.0", "120.00", "0.01"]
    code, stdout, _ = run_main(
        capsys, "predict", *runs, "--dtype", "float32", "--redop", "sum", "--algo", "ring"
    )
    assert code == 0, stdout
    fit_row = next(line for line in stdout.splitlines() if line.startswith("  all_reduce     ring"))
    # 0.0199: float32's reduction (2 GB/s) cannot be told from the link here, folded in.
    assert fit_row.split()[2:5] == ["300.0", "120.00", "0.0199"]
    # The check must be of the fitted kind.
    f6 = str(model_run(tmp_path / "f6", 6, ops=("all_reduce",), redop="max"))
    fitted = runs[0:6:2]
    err = _refused(capsys, *fitted, "--against", f6)
    assert "--against holds all_reduce of float32 max but the fit is of float32 sum" in err
    # The fitted runs hold no max: picking cannot help, so the advice is another check.
    assert err.endswith("check against runs of float32 sum")
    # --dtype that leaves the check nothing says so, rather than "no rows".
    err = _refused(capsys, *runs, "--dtype", "bfloat16", "--against", f6)
    assert "leave none of the --against runs' rows (they hold float32 max)" in err
    assert "one dtype" in _refused(capsys, *runs, "--dtype", "float32,bfloat16")
    assert "hold no all_reduce of int8 (they hold bfloat16 sum" in _refused(
        capsys, *runs, "--dtype", "int8"
    )
    # With a check too, the fitted runs' lack comes first: there is no "fitted kind".
    err = _refused(capsys, *runs, "--dtype", "int8", "--against", str(tmp_path / "f6"))
    assert "the fitted runs hold no all_reduce of int8" in err
    # --redop applies to reductions only, but one that leaves an op with nothing is
    # refused too, not a silent fit of the other ops.
    both = [str(model_run(tmp_path / f"g{n}", n)) for n in (2, 3)]
    err = _refused(capsys, *both, "--redop", "max")
    assert "hold no all_reduce of max (they hold float32 sum)" in err and "--op" in err
    code, stdout, _ = run_main(capsys, "predict", *both, "--redop", "max", "--op", "all_gather")
    assert code == 0 and "all_reduce" not in stdout.split("# models")[1]
    assert "unknown dtype" in _refused(capsys, *runs, "--dtype", "float33")


def test_nccl_variants_fit_ring_and_tree_separately(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree_params = models.Parameters(20.0, 3.0, 0.01, 0.0)
    runs = []
    for n in (2, 4, 8):
        for variant, algo, params in (
            ("NCCL_ALGO=Ring", models.RING, TRUE),
            ("NCCL_ALGO=Tree", models.DOUBLE_TREE, tree_params),
        ):
            name = f"{algo}{n}"
            runs.append(str(model_run(
                tmp_path / name, n, ops=("all_reduce",), params=params, algo=algo,
                nnodes=n // 2, backend="nccl", variant=variant,
            )))  # fmt: skip
    code, stdout, _ = run_main(capsys, "predict", *runs, "--ranks", "64", "--sizes", "64K")
    assert code == 0, stdout
    assert "fitted on double_tree runs" in stdout and "fitted on ring runs" in stdout
    assert "tree runs' link parameters" not in stdout.replace("double_tree runs'", "")
    assert "double_tree vs ring, 64 ranks" in stdout


def test_the_node_check_judges_only_the_fits_it_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Ring measured across 2 nodes, the tree on one node only.
    runs = [
        str(
            model_run(
                tmp_path / f"{algo}{n}",
                n,
                ops=("all_reduce",),
                algo=algo,
                nnodes=nodes,
                backend="nccl",
                variant=f"NCCL_ALGO={name}",
            )
        )
        for n in (4, 8)
        for algo, name, nodes in ((models.RING, "Ring", 2), (models.DOUBLE_TREE, "Tree", 1))
    ]
    argv = [*runs, "--ranks", "16,32", "--ranks-per-node", "8", "--sizes", "64K"]
    # --algo ring does not use the one-node tree fit: predicted, not refused.
    code, stdout, _ = run_main(capsys, "predict", *argv, "--algo", "ring")
    assert code == 0 and "fitted on ring runs" in stdout
    # The tree is refused, naming the one --ranks-per-node that serves both targets.
    err = _refused(capsys, *argv, "--algo", "double_tree")
    assert "all_reduce (double_tree) was measured on one node only" in err
    assert err.endswith("(--ranks-per-node 32)")
    # A check against a run across nodes cannot be fixed by --ranks-per-node.
    two = str(model_run(tmp_path / "two8", 8, ops=("all_reduce",), nnodes=2))
    one = [str(model_run(tmp_path / f"one{n}", n, ops=("all_reduce",), nnodes=1)) for n in (2, 4)]
    assert _refused(capsys, *one, "--against", two).endswith("check against a run on one node")


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, stdout, err = run_main(capsys, "predict", *argv)
    assert code == 2, stdout + err
    assert "Traceback" not in err
    message = err.strip()
    assert len(message.splitlines()) == 1
    return message


def test_refusals_say_what_to_measure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r4 = str(model_run(tmp_path / "r4", 4))
    assert "one world size only (4 ranks)" in _refused(capsys, r4, "--ranks", "64")
    few = [str(model_run(tmp_path / f"few{n}", n, sizes=[4096, 8192])) for n in (2, 3)]
    assert "at least 3" in _refused(capsys, *few, "--ranks", "64")
    single = [str(model_run(tmp_path / f"one{n}", n, nnodes=1)) for n in (2, 4)]
    message = _refused(capsys, *single, "--ranks", "16", "--ranks-per-node", "8")
    assert "measured on one node only" in message and "span 2 nodes" in message
    assert message.endswith("or put the target on one node (--ranks-per-node 16)")
    # With several targets it names the largest: the one value that serves them all.
    message = _refused(capsys, *single, "--ranks", "16,64", "--ranks-per-node", "8")
    assert message.endswith("(--ranks-per-node 64)")
    nccl = [
        str(model_run(tmp_path / f"nccl{n}", n, backend="nccl", ops=("all_reduce",)))
        for n in (2, 3)
    ]
    assert "without NCCL_ALGO" in _refused(capsys, *nccl, "--ranks", "64")
    # One --algo says which algorithm those runs used.
    code, _, _ = run_main(capsys, "predict", *nccl, "--ranks", "64", "--algo", "ring")
    assert code == 0
    r2 = str(model_run(tmp_path / "r2", 2))
    assert "both fitted and checked" in _refused(capsys, r2, r4, "--against", r4)
    assert "--max-error judges --against" in _refused(capsys, r2, r4, "--max-error", "5")
    assert "bad --algo" in _refused(capsys, r2, r4, "--algo", "butterfly")
    for ranks in ("1", "", "8,,64", "8.5"):
        assert "bad --ranks" in _refused(capsys, r2, r4, "--ranks", ranks)
    assert "bad --sizes '0'" in _refused(capsys, r2, r4, "--ranks", "8", "--sizes", "0")
    # A request below one float32 is no measurement at any N; said, not predicted.
    code, stdout, _ = run_main(capsys, "predict", r2, r4, "--ranks", "8", "--sizes", "2,4K")
    assert code == 0
    assert "# all_reduce at 8 ranks: 2 leave(s) less than one element" in stdout
    # Per size: 2 B is less than a float32, 8 B is two of them but no 16-byte chunk.
    code, stdout, _ = run_main(
        capsys, "predict", r2, r4, "--op", "all_gather", "--ranks", "8", "--sizes", "8,2"
    )
    assert "# all_gather at 8 ranks: 2 leave(s) less than one element" in stdout
    assert "# all_gather at 8 ranks: 8 leave(s) no whole 16-byte chunk per rank" in stdout
    r6 = str(model_run(tmp_path / "r6", 6))
    for bound in ("nan", "-1", "inf"):
        assert "bad --max-error" in _refused(capsys, r2, r4, "--against", r6, "--max-error", bound)
    # An --out that cannot be written fails before any table is printed.
    (tmp_path / "file").write_text("")
    code, stdout, err = run_main(capsys, "predict", r2, r4, "--out", str(tmp_path / "file" / "d"))
    assert code == 2 and stdout == "" and "cannot write into --out" in err
    # Without --ranks the fits are printed, and the output says that is all.
    code, stdout, _ = run_main(capsys, "predict", r2, r4)
    assert code == 0 and "# no --ranks: the fits only" in stdout
    assert "--plot draws predictions" in _refused(
        capsys, r2, r4, "--plot", "--out", str(tmp_path / "o")
    )


def test_the_algorithm_of_an_nccl_run_comes_from_nccl_algo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from colbench.config.variants import variant_env

    # Values may hold commas: a piece without "=" continues the previous value.
    assert variant_env("NCCL_ALGO=Ring,Tree,NCCL_PROTO=LL") == {
        "NCCL_ALGO": "Ring,Tree",
        "NCCL_PROTO": "LL",
    }
    # The per-collective form: all_reduce ran the tree (NCCL's Tree: the double tree).
    per_coll = [
        str(model_run(
            tmp_path / f"pc{n}", n, ops=("all_reduce",), algo=models.DOUBLE_TREE,
            backend="nccl", variant="NCCL_ALGO=allreduce:tree;allgather:ring",
        ))
        for n in (2, 4)
    ]  # fmt: skip
    code, stdout, _ = run_main(capsys, "predict", *per_coll, "--ranks", "8", "--sizes", "1M")
    assert code == 0 and "fitted on double_tree runs" in stdout
    # NCCL choosing between two algorithms per size is no single model.
    mixed = [
        str(model_run(
            tmp_path / f"mix{n}", n, ops=("all_reduce",), backend="nccl",
            variant="NCCL_ALGO=Ring,Tree",
        ))
        for n in (2, 4)
    ]  # fmt: skip
    assert "one algorithm per run" in _refused(capsys, *mixed, "--ranks", "8")
    # Protocols differ: two settings are two models, not one.
    protos = [
        str(model_run(
            tmp_path / f"proto{n}", n, ops=("all_reduce",), backend="nccl",
            variant=f"NCCL_ALGO=Ring,NCCL_PROTO={proto}",
        ))
        for n, proto in ((2, "LL"), (4, "Simple"))
    ]  # fmt: skip
    message = _refused(capsys, *protos, "--ranks", "8")
    assert "differ in their variant beyond NCCL_ALGO ('NCCL_PROTO=LL' vs" in message


def test_help_shows_examples_and_the_docs_document_predict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, stdout, _ = run_main(capsys, "predict", "--help")
    assert code == 0 and "Example" in stdout and "colbench predict " in stdout
    assert "--gpus-per-node" in stdout and "--against" in stdout
    docs = Path(__file__).resolve().parents[2] / "docs"
    assert "colbench predict " in (docs / "predict.md").read_text()
    assert "# Options of `colbench predict`" in (docs / "options.md").read_text()


def test_against_takes_every_run_up_to_the_next_option() -> None:
    from colbench.commands.predict.options import spread_against

    assert spread_against(["r2", "r3", "--against", "r6", "r8", "--out", "d"]) == [
        "r2", "r3", "--against", "r6", "--against", "r8", "--out", "d",
    ]  # fmt: skip
    assert spread_against(["r2", "--against=r6", "r8", "--plot"]) == [
        "r2", "--against=r6", "--against", "r8", "--plot",
    ]  # fmt: skip
    # Other options' values, and words after "--", stay where they are.
    assert spread_against(["r2", "--ranks", "8", "r3", "--against", "r6", "--", "r9"]) == [
        "r2", "--ranks", "8", "r3", "--against", "r6", "--", "r9",
    ]  # fmt: skip


def test_a_fit_the_model_does_not_describe_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Times that jump by 3x between neighbouring sizes (a loaded machine), at every N.
    def jumpy(op: str, n: int, size: int, time: float) -> float:
        return time * (1.8 if size.bit_length() % 2 else 0.6)

    runs = [str(model_run(tmp_path / f"r{n}", n, distort=jumpy)) for n in (2, 3, 4)]
    code, stdout, _ = run_main(capsys, "predict", *runs, "--ranks", "8")
    assert code == 0
    warned = [line for line in stdout.splitlines() if "warning:" in line]
    assert len(warned) == 2 and "predictions from it are unreliable" in warned[0]
    # The model's own times are not flagged.
    clean = [str(model_run(tmp_path / f"c{n}", n)) for n in (2, 3, 4)]
    code, stdout, _ = run_main(capsys, "predict", *clean, "--ranks", "8")
    assert code == 0 and "warning:" not in stdout


def test_the_figure_shows_binary_sizes_the_measured_points_and_no_empty_panel(
    fabric_runs: dict[int, str],
) -> None:
    from colbench.commands.predict import data, engine
    from colbench.commands.predict.report import figure
    from colbench.results.series import load_runs

    measured = data.measured_of(load_runs([fabric_runs[2], fabric_runs[3]]), None, ["all_gather"])
    fits = engine.fit_all(measured)
    elem = {"all_gather": 4}
    predicted = engine.predict_grid(fits, {"all_gather": [4096, 1 << 20]}, [64], None, [], elem)
    # all_gather has only a ring: nothing to cross, so no crossover panel at all.
    crossings = engine.crossovers(fits, ["all_gather"], [64], None, [])
    fig = figure(predicted, crossings, measured)
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    ax.figure.canvas.draw()
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert "4K" in ticks and "1M" in ticks and not any("^" in t for t in ticks)
    points = [line for line in ax.get_lines() if line.get_label().startswith("measured")]
    assert sorted(line.get_label() for line in points) == [
        "measured, 2 ranks (ring)",
        "measured, 3 ranks (ring)",
    ]
    assert sum(len(line.get_xdata()) for line in points) == sum(len(m.size_bytes) for m in measured)
