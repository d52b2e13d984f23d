#!/usr/bin/env bash
# The project's set-up and run commands (see README):
#   bash dev.sh example   install everything, build, run examples/bert_model.py
#   bash dev.sh test      install everything, build, run all lit and pytest tests
#   bash dev.sh build     install everything and build only
#   bash dev.sh bench     install everything, run benchmarks/linear_suite.py
# Python packages go to .venv (override with SPARSE_MLIR_VENV); the C++ build
# is incremental in build/py (ccache is used when present).
set -euo pipefail
cd "$(dirname "$0")"
VENV=${SPARSE_MLIR_VENV:-.venv}
PY=${PYTHON:-python3}

log() { echo "[dev.sh] $*" >&2; }

install_system_packages() {
  # ccache makes rebuilds seconds instead of minutes (optional); libomp is
  # the OpenMP runtime compiled kernels run their threads on (without it
  # they run on one thread, with a warning).
  local missing=()
  command -v ccache >/dev/null 2>&1 || missing+=(ccache)
  [ -e /usr/lib/x86_64-linux-gnu/libomp.so.5 ] || [ -e /usr/lib/aarch64-linux-gnu/libomp.so.5 ] \
    || missing+=(libomp5)
  if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    log "installing ${missing[*]} (apt)"
    (apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null) \
      || log "${missing[*]} not installed (kernels then run without ccache / on one thread)"
  fi
}

setup() {
  install_system_packages
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV"
    "$PY" -m venv "$VENV"
  fi
  local stamp="$VENV/.requirements.sha"
  local want
  want=$(sha256sum requirements-dev.txt | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    log "installing Python requirements"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q -r requirements-dev.txt
    echo "$want" > "$stamp"
  fi
  log "building and installing sparse_mlir"
  local t0=$SECONDS
  "$VENV/bin/pip" install -q --no-build-isolation --no-deps .
  log "build + install took $((SECONDS - t0)) s"
}

run_tests() {
  log "lit tests"
  "$VENV/bin/lit" -sv build/py/test
  log "pytest"
  # The pytest binary (not `python -m pytest`) keeps the source tree off
  # sys.path, so the tests import the installed package with its extension.
  "$VENV/bin/pytest" -ra "$@"
}

cmd=${1:-test}
shift || true
case "$cmd" in
  build) setup ;;
  test) setup; run_tests "$@" ;;
  example) setup; "$VENV/bin/python" examples/bert_model.py "$@" ;;
  bench) setup; "$VENV/bin/python" benchmarks/linear_suite.py "$@" ;;
  *) echo "usage: bash dev.sh {example|test|build|bench}" >&2; exit 2 ;;
esac
