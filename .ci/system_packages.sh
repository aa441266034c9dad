#!/usr/bin/env bash
# The Debian packages the tests and CI need, installed once, before anything uses them:
#
#   chromium          the report and `focalcal calibrate` pages checked in headless Chromium (tests/)
#   slurm-wlm, munge  the one-node SLURM cluster of .ci/slurm_test.sh
#
#   .ci/system_packages.sh            # as root: installs what is missing (apt-get update first)
#   .ci/system_packages.sh --check    # any user: says what is missing, exit 1 if anything is
#
# The compiler (g++) and Python 3.11 with venv are the machine's; `make venv` installs the rest
# with pip. apt holds its own lock, so this script takes one of its own before it looks, and a
# second caller waits for the first instead of failing on dpkg's lock.
set -euo pipefail

read -r -a PACKAGES <<< "${FOCALCAL_SYSTEM_PACKAGES:-chromium slurm-wlm munge}"  # the variable: for its test
LOCK="${FOCALCAL_SYSTEM_PACKAGES_LOCK:-/var/lock/focalcal-system-packages.lock}"

missing() {
    local package
    for package in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || echo "$package"
    done
}

if [[ "${1:-}" == "--check" ]]; then
    absent="$(missing | tr '\n' ' ')"
    if [[ -n "$absent" ]]; then
        echo "system_packages: missing Debian package(s): $absent; install them with: sudo .ci/system_packages.sh" >&2
        exit 1
    fi
    exit 0
fi

exec 9>"$LOCK" 2>/dev/null || exec 9>"${TMPDIR:-/tmp}/focalcal-system-packages.lock"  # not root: check only
flock 9
mapfile -t absent < <(missing)
if (( ${#absent[@]} == 0 )); then
    echo "system_packages: ${PACKAGES[*]} already installed"
    exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
    echo "system_packages: must run as root to install ${absent[*]} (sudo .ci/system_packages.sh)" >&2
    exit 2
fi
echo "system_packages: installing ${absent[*]} (apt-get update first)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq; then
    echo "system_packages: FAILED: apt-get update could not read the package lists; ${absent[*]} not installed" >&2
    exit 1
fi
# chromium with its recommended fonts (screenshots of the report); SLURM without its extras
with_recommends=() without=()
for package in "${absent[@]}"; do
    if [[ "$package" == chromium ]]; then with_recommends+=("$package"); else without+=("$package"); fi
done
if ! { (( ${#with_recommends[@]} == 0 )) || apt-get install -y -qq "${with_recommends[@]}" >/dev/null; } ||
   ! { (( ${#without[@]} == 0 )) || apt-get install -y -qq --no-install-recommends "${without[@]}" >/dev/null; }; then
    echo "system_packages: FAILED: apt-get install ${absent[*]} did not succeed (see apt's message above)" >&2
    exit 1
fi
still="$(missing | tr '\n' ' ')"
if [[ -n "$still" ]]; then
    echo "system_packages: FAILED: still missing after apt-get install: $still" >&2
    exit 1
fi
echo "system_packages: installed ${absent[*]}"
