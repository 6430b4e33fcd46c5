#!/usr/bin/env bash
# CI, TensorFlow part (called by .ci/run; also runs alone on a fresh Debian 12 machine as root):
# installs a C++ compiler, Python's venv module and clang (for the fuzzer corpus), then
#   make tf-oracle   (tests/tf/setup.sh pip-installs tensorflow-cpu into build/tf-venv first; the
#                     oracle must also read the fuzz corpus: a short `make fuzz` makes one if absent)
#   make bench-tf
# Both always run; the exit status is non-zero when either fails (the oracle fails on any undeclared
# disagreement with TensorFlow).
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/apt.sh
ci_install \
  g++ make python3 python3-venv python3-pip ca-certificates clang libclang-rt-14-dev
rc=0
if [ ! -d build/fuzz/corpus ]; then
  echo "== fuzz (10 s, for the oracle's corpus)"
  FUZZ_SECONDS=10 make --no-print-directory fuzz || rc=$?
fi
echo "== tf-oracle"
make --no-print-directory tf-oracle ORACLE_ARGS=--require-corpus || { r=$?; [ "$rc" != 0 ] || rc=$r; }
echo "== bench-tf"
make --no-print-directory bench-tf || { r=$?; [ "$rc" != 0 ] || rc=$r; }
exit "$rc"
