#!/usr/bin/env bash
# Install (first run) and start State Lens on the bundled sample checkpoints.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
exec .venv/bin/python -m streamlit run app.py --browser.gatherUsageStats false "$@"
