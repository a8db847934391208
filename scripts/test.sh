#!/usr/bin/env bash
# Install (first run) and run the whole test suite, browser tests included.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
if [ ! -x /usr/bin/chromium ]; then
    echo "Installing Debian's chromium for the browser tests..."
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
exec .venv/bin/python -m pytest "$@"
