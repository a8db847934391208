#!/usr/bin/env bash
# Install (first run) and run the whole test suite, browser tests included.
#   bash scripts/test.sh          the whole suite, as CI runs it
#   bash scripts/test.sh --fast   the tests that need no JVM, browser or emulator (under 2 minutes)
#   bash scripts/test.sh ARGS     pytest with ARGS
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
# Python keeps the modules it compiles (as on a user's machine), even where the machine sets
# PYTHONDONTWRITEBYTECODE: the tests start hundreds of CLI and job processes, and each would compile
# State Lens's modules again (0.1 CPU s a process: 0.69 instead of 0.59 for a `doctor`)
unset PYTHONDONTWRITEBYTECODE
if [ "${1:-}" = "--fast" ]; then
    shift
    # Java and Chromium out of reach: a test that needs one and is not marked (tests/conftest.py) fails
    export JAVA_HOME=/nonexistent/java BROWSER_PATH=/nonexistent/chromium
    exec .venv/bin/python -m pytest -m "not jvm and not browser and not emulator" \
        -n "${STATELENS_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder -p no:cacheprovider "$@"
fi
if [ ! -x /usr/bin/chromium ]; then
    echo "Installing Debian's chromium for the browser tests..."
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
if [ ! -x .tools/node_modules/.bin/azurite-blob ]; then
    echo "Installing Azurite (Microsoft's Azure Storage emulator) for the storage tests..."
    npm install --silent --no-audit --no-fund --prefix .tools azurite@3.37.0 >/dev/null
fi
# The whole suite (no arguments): whole test files side by side in 4 processes (half the suite waits on
# JVMs, servers and browsers starting), the longest files first (tests/conftest.py), the slowest tests
# listed at the end. With arguments: as given.
if [ "$#" -eq 0 ]; then
    set -- -n "${STATELENS_TEST_WORKERS:-4}" --dist loadfile --no-loadscope-reorder --durations=30
fi
exec .venv/bin/python -m pytest "$@"
