#!/usr/bin/env bash
# The project's set-up and run commands (see README):
#   bash dev.sh example   install everything, build, run examples/bert_model.py
#   bash dev.sh test      install everything, build, run all lit and pytest tests
#   bash dev.sh build     install everything and build only
#   bash dev.sh bench     install everything, run benchmarks/linear_suite.py
#   bash dev.sh fuzz      install everything, build sparse-mlir-opt and the C loader
#                         with ASan + UBSan (build/asan), run test/fuzz with the long budget
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

build_asan() {
  # sparse-mlir-opt with AddressSanitizer + UBSan in its own build dir; the
  # MLIR/LLVM libraries it links (the PyPI wheels' libMLIR.so) stay
  # uninstrumented, which ASan allows (their own bugs go unseen).
  local flags="-fsanitize=address,undefined -fno-omit-frame-pointer -g"
  log "building sparse-mlir-opt with ASan + UBSan in build/asan"
  local t0=$SECONDS
  "$VENV/bin/cmake" -S . -B build/asan -G Ninja -DCMAKE_MAKE_PROGRAM="$VENV/bin/ninja" \
    -DPython_EXECUTABLE="$VENV/bin/python" -DCMAKE_BUILD_TYPE=Release \
    -DSPARSE_MLIR_ENABLE_PYTHON=OFF -DSPARSE_MLIR_ENABLE_OPT=ON \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
  "$VENV/bin/ninja" -C build/asan sparse-mlir-opt
  log "ASan build took $((SECONDS - t0)) s"
}

run_fuzz() {
  build_asan
  # The long budget (SPARSE_MLIR_FUZZ_EXAMPLES=n to change it); the opt and
  # C-loader fuzzers run the sanitized binaries. Counts go to build/fuzz/report.jsonl.
  mkdir -p build/fuzz
  : > build/fuzz/report.jsonl
  : > build/fuzz/details.log
  local status=0
  SPARSE_MLIR_FUZZ=${SPARSE_MLIR_FUZZ:-long} \
  SPARSE_MLIR_FUZZ_OPT="$PWD/build/asan/bin/sparse-mlir-opt" \
  SPARSE_MLIR_FUZZ_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
  SPARSE_MLIR_FUZZ_REPORT="$PWD/build/fuzz/report.jsonl" SPARSE_MLIR_FUZZ_LOG="$PWD/build/fuzz/details.log" \
    "$VENV/bin/pytest" -ra test/fuzz "$@" || status=$?
  log "counts (build/fuzz/report.jsonl):"
  cat build/fuzz/report.jsonl >&2
  return $status
}

cmd=${1:-test}
shift || true
case "$cmd" in
  build) setup ;;
  test) setup; run_tests "$@" ;;
  example) setup; "$VENV/bin/python" examples/bert_model.py "$@" ;;
  bench) setup; "$VENV/bin/python" benchmarks/linear_suite.py "$@" ;;
  fuzz) setup; run_fuzz "$@" ;;
  *) echo "usage: bash dev.sh {example|test|build|bench|fuzz}" >&2; exit 2 ;;
esac
