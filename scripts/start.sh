#!/usr/bin/env bash
# Install (first run) and start State Lens on the bundled sample checkpoints, on 127.0.0.1.
# Streamlit options pass through: --server.port 8600, --server.address 0.0.0.0 (other machines).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec .venv/bin/python cli.py app "$@"
