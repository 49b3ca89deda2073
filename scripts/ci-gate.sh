#!/bin/sh
# The CPU regression gate, as CI and `make gate-smoke` run it: measure the smoke suite,
# gate it against this runner's baseline, and (with --accept, on the main branch) add the
# run to the baseline's rolling window of accepted runs.
#
#   scripts/ci-gate.sh [--accept] BASELINE_DIR OUT_DIR
#
# The suite is configs/smoke-cpu.yaml (SMOKE_SUITE overrides it, for tests); no sweep
# flag lives here. A BASELINE_DIR that does not exist yet (a fresh runner) judges the run
# alone: correctness and presence, performance "not judged"; --accept then starts the
# baseline. A baseline from another machine (its fingerprint: CPU, cores, GPUs, versions)
# judges correctness and presence, performance "not comparable". Once the window holds 5 runs (the gate's --min-baseline-runs), performance is
# judged on their between-run drift rather than on one run's spread (docs/gate.md).
# Exit status: the sweep's when it failed, else the gate's (0 pass, 1 fail).
# Environment: PY (python with colbench, default .venv/bin/python), KEEP (runs in the
# baseline window, default 10: enough runs to know the runner's drift), SMOKE_SUITE.
set -u
accept=0
if [ "${1:-}" = "--accept" ]; then accept=1; shift; fi
if [ $# -ne 2 ]; then
    echo "usage: scripts/ci-gate.sh [--accept] BASELINE_DIR OUT_DIR" >&2
    exit 2
fi
baseline=$1
out=$2
py=${PY:-.venv/bin/python}
suite=${SMOKE_SUITE:-configs/smoke-cpu.yaml}
keep=${KEEP:-10}
# The gate's checks for the smoke suite: the suite measures 4M-16M for performance
# (docs/gate.md, "The smoke suite"); fewer than 8 rows able to see a slowdown there
# passes on correctness only and says so.
set -- --check busbw_gbps:-25% --min-size 4M --min-judged 8

# The run directory's name is the run's id, which names it in the baseline's window.
run=$out/run-$(date -u +%Y%m%dT%H%M%SZ)
rm -rf "$out"/run-*
mkdir -p "$out" || exit 2
"$py" -m colbench run "$suite" --no-table --out "$run"
sweep=$?
"$py" -m colbench gate "$baseline" "$run" "$@" --missing-baseline-ok \
    --report "$out/gate.md" --junit "$out/gate.xml" > "$out/gate.txt"
gate=$?
if [ $gate -ne 0 ]; then cat "$out/gate.txt"; else tail -1 "$out/gate.txt"; fi
if [ $sweep -ne 0 ]; then exit $sweep; fi
if [ $gate -eq 0 ] && [ $accept -eq 1 ]; then
    "$py" -m colbench gate "$baseline" "$run" --update-baseline --keep "$keep" \
        > /dev/null || exit $?
fi
exit $gate
