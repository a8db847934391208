#!/usr/bin/env bash
# Install (first run) and run the whole test suite, browser tests included.
#   bash scripts/test.sh          the whole suite, as CI runs it
#   bash scripts/test.sh --fast   the tests that need no JVM, browser or emulator (under 2 minutes)
#   bash scripts/test.sh ARGS     pytest with ARGS
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The whole suite's browser and storage emulator (first run) download while Python's packages do
# (sudo that asks for a password asks first, in the foreground)
installs=()
background_install() {  # WHAT TESTS COMMAND...: its output kept, shown if it fails
    local log; log="$(mktemp)"
    echo "Installing $1 for the $2 tests..."
    ( "${@:3}" ) >"$log" 2>&1 &
    installs+=("$!:$1:$log")
}
if [ "${1:-}" != "--fast" ]; then
    # chromium for chart images (kaleido), its headless shell for the browser tests (tests/browser/conftest.py)
    if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromium-headless-shell ]; then
        SUDO=""; [ "$(id -u)" -eq 0 ] || { SUDO="sudo"; sudo -v; }
        background_install "Debian's chromium" browser \
            bash -c "$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-headless-shell"
    fi
    [ -x .tools/node_modules/.bin/azurite-blob ] || background_install "Azurite (Microsoft's Azure Storage emulator)" storage \
        npm install --silent --no-audit --no-fund --prefix .tools azurite@3.37.0
fi
# Python keeps the modules it compiles (as on a user's machine), even where the machine sets
# PYTHONDONTWRITEBYTECODE: the tests start hundreds of CLI and job processes, and each would compile
# State Lens's modules again (0.1 CPU s a process: 0.69 instead of 0.59 for a `doctor`); unset before
# the install, which then leaves the packages' modules to be compiled at their first import
unset PYTHONDONTWRITEBYTECODE
source scripts/setup.sh
for job in "${installs[@]}"; do
    IFS=: read -r pid what log <<<"$job"
    if ! wait "$pid"; then
        cat "$log" >&2
        echo "Installing $what failed (its output above)." >&2
        exit 1
    fi
    rm -f "$log"
done
if [ "${1:-}" = "--fast" ]; then
    shift
    # Java and Chromium out of reach: a test that needs one and is not marked (tests/conftest.py) fails
    export JAVA_HOME=/nonexistent/java BROWSER_PATH=/nonexistent/chromium
    exec .venv/bin/python -m pytest -m "not jvm and not browser and not emulator" \
        -n "${STATELENS_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder -p no:cacheprovider "$@"
fi
# The whole suite (no arguments): whole test files side by side in 4 processes (half the suite waits on
# JVMs, servers and browsers starting), the longest files first (tests/conftest.py), the slowest tests
# listed at the end. With arguments: as given.
if [ "$#" -eq 0 ]; then
    set -- -n "${STATELENS_TEST_WORKERS:-4}" --dist loadfile --no-loadscope-reorder --durations=30
fi
exec .venv/bin/python -m pytest "$@"
