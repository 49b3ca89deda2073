#!/bin/sh
# The interleaved A/B gate, as a pull request's CI job and `make gate-ab` run it: this
# checkout's colbench (B, "pr") against another commit's (A, "base": the merge base in
# CI), each in its own virtual environment, measured in ONE run taking turns per size and
# repeat (`--python base=...,pr=...`) and judged pair by pair by the paired gate, which
# cancels the machine's drift that a stored baseline cannot (docs/gate.md).
#
#   scripts/gate-ab.sh BASE_REF OUT_DIR
#
# The suite is configs/ab-cpu.yaml (AB_SUITE overrides it); no sweep flag of the
# measurement lives here. BASE_REF's tree is exported to OUT_DIR/base-<sha> and `make
# install` builds its own .venv there (kept for the next run of the same commit). A base
# that cannot run interleaved with this checkout (an older colbench without the turn
# protocol, or another protocol version, or an environment that does not build) is no
# verdict: the script says so and, when STORED_BASELINE is set, gates the smoke suite
# against that stored baseline instead (scripts/ci-gate.sh), exiting with its status.
# Exit status: the paired gate's (0 pass, 1 fail, 5 inconclusive: it could not have
# seen a slowdown), 2 for bad arguments.
# Environment: PY (this checkout's python with colbench, default .venv/bin/python),
# PYTHON and TORCH_INDEX (passed to the base's `make install`), AB_SUITE, AB_CHECK
# (default busbw_gbps:-10%), STORED_BASELINE (the fallback; unset: none),
# GITHUB_STEP_SUMMARY (where the summary goes, as in CI).
set -u
[ $# -eq 2 ] || { echo "usage: scripts/gate-ab.sh BASE_REF OUT_DIR" >&2; exit 2; }
ref=$1 out=$2
summary=${GITHUB_STEP_SUMMARY:-/dev/null}
check=${AB_CHECK:-busbw_gbps:-10%}
shown=${AB_SUITE:-configs/ab-cpu.yaml}
suite=$shown
py=${PY:-.venv/bin/python}

sha=$(git rev-parse --verify --quiet "$ref^{commit}") || {
    echo "gate-ab: $ref names no commit here (fetch it first?)" >&2
    exit 2
}
short=$(echo "$sha" | cut -c1-12)
[ -f "$suite" ] || { echo "gate-ab: no suite $suite" >&2; exit 2; }
suite=$(cd "$(dirname "$suite")" && pwd)/$(basename "$suite")
scripts=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
base=$out/base-$short
pr_py=$(cd "$(dirname "$py")" && pwd)/$(basename "$py")
checkout=$(pwd)

# Say why the A/B gate did not judge, and fall back to the stored baseline (if any).
fallback() {
    echo "gate-ab: the base $short cannot run interleaved with this checkout: $1" >&2
    {
        echo "### Interleaved A/B gate: not run"
        echo
        echo "The merge base \`$short\` cannot run interleaved with this pull request: $1."
        echo "Performance is judged by the stored-baseline gate only, which sees far less"
        echo "(its last line says how much)."
        echo
    } >> "$summary"
    if [ -z "${STORED_BASELINE:-}" ]; then
        exit 0
    fi
    echo "gate-ab: gating the smoke suite against the stored baseline $STORED_BASELINE" >&2
    cd "$checkout" || exit 2
    PY=$pr_py "$scripts/ci-gate.sh" "$STORED_BASELINE" "$out/stored"
    exit $?
}

# The base's own environment: its tree, its pyproject, its `make install`.
if [ ! -f "$base/.venv/.installed" ]; then
    rm -rf "$base" && mkdir -p "$base" || exit 2
    git archive "$sha" | tar -x -C "$base" || exit 2
    echo "gate-ab: building the environment of $short in $base/.venv" >&2
    make -C "$base" install ${PYTHON:+PYTHON=$PYTHON} ${TORCH_INDEX:+TORCH_INDEX=$TORCH_INDEX} \
        > "$base.install.log" 2>&1 || fallback "its environment did not build ($base.install.log)"
fi
base_py=$base/.venv/bin/python
# From a directory of our own: -m puts the working directory first on sys.path, and a
# checkout's colbench there would shadow the base's.
cd "$out" || exit 2

# A second of interleaving first: whatever keeps the two from taking turns shows here.
rm -rf probe
if ! "$pr_py" -m colbench sweep --op all_reduce --sizes 1K -n 1 -w 0 --backend gloo \
    --nprocs 2 --no-table --python "base=$base_py,pr=$pr_py" --out probe > probe.log 2>&1; then
    why=$(grep 'colbench: error' probe.log | tail -1)
    fallback "$(echo "${why:-$(tail -1 probe.log)}" | cut -c1-300)"
fi

rm -rf ab
"$pr_py" -m colbench run "$suite" --no-table --python "base=$base_py,pr=$pr_py" --out ab \
    || exit $?
{
    echo "### Interleaved A/B gate: this checkout against \`$short\`"
    echo
    echo "Judged here: performance of \`$shown\` (\`--check $check\`), this checkout (B) against"
    echo "\`$short\` (A), measured in one run taking turns; correctness and presence of every"
    echo "collective are the stored-baseline gate's (the smoke suite)."
    echo
} >> "$summary"
"$pr_py" -m colbench gate ab --variant-a python=base --variant-b python=pr \
    --check "$check" --fail-inconclusive --report "$out/gate-ab.md" > "$out/gate-ab.txt"
gate=$?
cat "$out/gate-ab.txt"
exit $gate
