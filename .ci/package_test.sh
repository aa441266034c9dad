#!/usr/bin/env bash
# The package as users get it (issue: a library anyone can install). From the repository root:
#   1. build the sdist and the wheel (python -m build) and check their metadata (twine, and
#      .ci/package_checks.py distributions: version, SPDX licence, ranges never ==, extras);
#   2. core only: the wheel alone in a clean venv; no torch/matplotlib/pandas comes with it, the
#      core modules import none of them, and the library pages' recipes run;
#      then the plots extra added (no torch): the own-logits quick start's `focalcal calibrate` runs;
#   3. the research environment (numpy 1.26.4, pandas 2.2.3, scikit-learn 1.5.2): pip's dry-run
#      plan for the wheel installs focalcal and threadpoolctl only, and changes nothing else;
#   4. lowest: focalcal[torch,plots,test] with every requirement at its declared lower bound,
#      then the library's tests and the API reference's doctests;
#   5. newest: the same at the newest versions the registry serves (no constraint file).
# Each environment is a fresh venv under build/package-test/ (PACKAGE_TEST_DIR to move it). The two
# torch environments hold several GB of CUDA wheels each, and CI machines can be short of disk: pip
# keeps no cache of them, each is removed once its tests pass, and each install first checks that
# the disk has room for it (TORCH_ENV_MB), so that a full disk is named as such before any download.
set -euo pipefail
export PIP_NO_CACHE_DIR=1
TORCH_ENV_MB=${TORCH_ENV_MB:-9000}
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
WORK=$(realpath -m "${PACKAGE_TEST_DIR:-build/package-test}")
CHECKS="$PWD/.ci/package_checks.py"
# The library's own tests: those of metrics, calibration, losses and theory (the workflow's need
# the lock's environment; tests/test_against_netcal.py needs netcal, which is in `dev` only).
LIBRARY_TESTS=(
    tests/test_metrics_calibration.py tests/test_metrics_classification.py tests/test_metrics_segmentation.py
    tests/test_bootstrap.py tests/test_probs_precision.py
    tests/test_calibration.py tests/test_calibration_beta.py tests/test_calibration_temperature.py
    tests/test_dirichlet_ets.py
    tests/test_losses.py tests/test_losses_adafocal.py tests/test_losses_fastpaths.py tests/test_losses_fused.py
    tests/test_losses_smoothing_convention.py tests/test_losses_toy.py
    tests/test_theory_minimizer.py tests/test_theory_psi.py tests/test_theory_scalars.py
)
DOCTESTS=(focalcal.metrics focalcal.calibration focalcal.losses focalcal.theory)

step() { printf '\npackage-test: %s\n' "$*"; }
seconds() { local start=$1; echo $(( $(date +%s) - start )); }
free_mb() { df -Pm "$1" | awk 'NR == 2 { print $4 }'; }
need_room() {  # $1: the environment's name
    local free
    free=$(free_mb "$WORK")
    echo "  $free MB free on $(df -P "$WORK" | awk 'NR == 2 { print $6 }'); $1 needs about $TORCH_ENV_MB MB"
    if (( free < TORCH_ENV_MB )); then
        echo "package-test: FAILED: $WORK has $free MB free and the $1 environment needs about $TORCH_ENV_MB MB (torch and its CUDA wheels); free disk space there, or set PACKAGE_TEST_DIR to a disk with room" >&2
        exit 1
    fi
}
fresh_venv() { rm -rf "$WORK/$1"; "$PYTHON" -m venv "$WORK/$1"; "$WORK/$1/bin/python" -m pip install --quiet --upgrade pip; }

rm -rf "$WORK"
mkdir -p "$WORK"

step "1. build the sdist and the wheel, check their metadata"
fresh_venv tools
"$WORK/tools/bin/pip" install --quiet 'build>=1.2' 'twine>=6.1'
"$WORK/tools/bin/python" -m build --outdir "$WORK/dist" . > "$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; exit 1; }
if grep -n "Warning\|WARNING" "$WORK/build.log" | grep -v "Location '\|is ignored: it is neither"; then
    echo "package-test: FAILED: the build printed the warnings above" >&2; exit 1
fi
"$WORK/tools/bin/twine" check --strict "$WORK"/dist/*
"$WORK/tools/bin/python" "$CHECKS" distributions "$WORK/dist"
WHEEL=$(ls "$WORK"/dist/*.whl)

step "2. core only: the wheel alone in a clean venv"
fresh_venv core
start=$(date +%s)
"$WORK/core/bin/pip" install --quiet "$WHEEL"
echo "  installed in $(seconds "$start") s; the venv holds $(du -sm "$WORK/core" | cut -f1) MB: $("$WORK/core/bin/pip" list --format=freeze 2>/dev/null | grep -v '^pip=' | tr '\n' ' ')"
(cd "$WORK" && "$WORK/core/bin/python" "$CHECKS" core)
"$WORK/core/bin/pip" install --quiet "$WHEEL[plots]"
"$WORK/core/bin/python" "$CHECKS" own-logits

step "3. the research environment: what pip would install beside numpy 1.26.4, pandas 2.2.3, scikit-learn 1.5.2"
fresh_venv research
"$WORK/research/bin/pip" install --quiet numpy==1.26.4 pandas==2.2.3 scikit-learn==1.5.2
"$WORK/research/bin/pip" install --quiet --dry-run --report "$WORK/plan.json" "$WHEEL"
"$WORK/research/bin/python" "$CHECKS" plan "$WORK/plan.json"

library_tests() {  # $1: the environment's name
    local env="$WORK/$1" start
    start=$(date +%s)
    "$env/bin/python" -m focalcal build-kernels || true  # as make venv does: the eager path where it fails
    # From the checkout's root, tests/ import focalcal from the installed wheel (src/ is not on the path).
    "$env/bin/python" -m pytest -q -p no:cacheprovider -n 2 --dist worksteal "${LIBRARY_TESTS[@]}" \
        --doctest-modules --pyargs "${DOCTESTS[@]}"
    echo "  $1: library tests and doctests in $(seconds "$start") s"
}

step "4. lowest: focalcal[torch,plots,test] at every declared lower bound"
"$PYTHON" "$CHECKS" lowest torch plots test > "$WORK/lowest.txt"
tr '\n' ' ' < "$WORK/lowest.txt"; echo
rm -rf "$WORK/tools" "$WORK/core" "$WORK/research"
need_room lowest
fresh_venv lowest
start=$(date +%s)
"$WORK/lowest/bin/pip" install --quiet "$WHEEL[torch,plots,test]" 'pytest-xdist>=3.6' -c "$WORK/lowest.txt"
echo "  installed in $(seconds "$start") s; the venv holds $(du -sm "$WORK/lowest" | cut -f1) MB"
library_tests lowest
rm -rf "$WORK/lowest"

step "5. newest: focalcal[torch,plots,test] at the newest versions the registry serves"
need_room newest
fresh_venv newest
start=$(date +%s)
# No pip configuration file here: a machine's pip.conf may cap a release (this workplace's caps torch
# at the one on its disk), and "newest" means what the registry serves.
PIP_CONFIG_FILE=/dev/null "$WORK/newest/bin/pip" install --quiet "$WHEEL[torch,plots,test]" 'pytest-xdist>=3.6'
echo "  installed in $(seconds "$start") s: $("$WORK/newest/bin/pip" list --format=freeze 2>/dev/null | grep -iE '^(numpy|scipy|torch|torchvision|pandas|matplotlib)=' | tr '\n' ' '); the venv holds $(du -sm "$WORK/newest" | cut -f1) MB"
library_tests newest
rm -rf "$WORK/newest"

step "passed"
