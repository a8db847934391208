#!/usr/bin/env bash
# Creates .venv with the pinned requirements (skipped when they have not changed) and
# checks Java. Sourced by scripts/start.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if ! "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    echo "State Lens needs Python 3.11 or newer (found: $("$PYTHON" --version 2>&1))." >&2
    exit 1
fi
if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
    echo "Java was not found. Spark needs Java 17: sudo apt-get install -y openjdk-17-jre-headless (or set JAVA_HOME)." >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv || {
        echo "Could not create a virtual environment: sudo apt-get install -y python3-venv" >&2
        exit 1
    }
fi
stamp=.venv/.requirements.sha256
want="$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    # uv installs the pinned packages (the same wheels pip would) about half again faster than pip: it
    # downloads side by side. It compiles their 15,000 modules (15 s) only where Python would not keep
    # what it compiles (PYTHONDONTWRITEBYTECODE set: numpy's and pyarrow's compiled again in every
    # process); elsewhere a module is compiled and kept at its first import, as pip's installs are
    uv=(.venv/bin/uv pip install --quiet --python .venv/bin/python)
    [ -z "${PYTHONDONTWRITEBYTECODE:-}" ] || uv+=(--compile-bytecode)
    .venv/bin/python -m pip install --quiet --disable-pip-version-check uv==0.13.9
    "${uv[@]}" -r requirements.txt
    # State Lens itself, as this folder (editable): `statelens` and `import statelens` from any folder
    # (its build warns that a folder named statelens may shadow it: shown only if the install fails)
    if ! out="$("${uv[@]}" --no-deps -e . 2>&1)"; then
        echo "$out" >&2
        exit 1
    fi
    echo "$want" > "$stamp"
fi
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
