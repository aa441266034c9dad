#!/usr/bin/env bash
# Check a finished HTML report in headless Chromium: every page loads, every image decodes
# (non-zero natural size), no local link is broken; saves a screenshot of the index next to
# it (results/report/index.png).
#
#   .ci/report_browser_test.sh [REPORT_DIR]        # default: results/report
#
# Chromium comes from Debian's `chromium` package. When it is missing this script installs
# it through .ci/system_packages.sh if it runs as root with CI=true; otherwise it stops and
# says how to install it. It never skips the check.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
REPORT_DIR="${1:-$ROOT/results/report}"

if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
    if [[ "$(id -u)" == 0 && "${CI:-}" == "true" ]]; then
        "$ROOT/.ci/system_packages.sh"
    else
        echo "report_browser_test: chromium is not installed; install it with: sudo .ci/system_packages.sh" >&2
        exit 2
    fi
fi

if [[ ! -f "$REPORT_DIR/index.html" ]]; then
    echo "report_browser_test: no $REPORT_DIR/index.html; build the report first (make run)" >&2
    exit 2
fi
exec "$PYTHON" -m focalcal.report.browser "$REPORT_DIR"
