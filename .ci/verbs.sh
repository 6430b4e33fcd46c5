#!/usr/bin/env bash
# CI for tfrdv_verbs.h on a fresh Debian 12 machine (root): the device-free unit test and a bounded
# fuzz run, then real libibverbs + real Soft-RoCE (rdma_rxe) inside a QEMU guest (make test-rxe,
# which installs its own Debian packages and never skips). About 3-4 minutes on 2 cores, most of
# it TCG emulation.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/apt.sh
ci_install build-essential make clang libclang-rt-14-dev libibverbs-dev \
  qemu-system-x86 busybox-static ibverbs-providers ibverbs-utils rdma-core perftest cpio iproute2
if [ "${TFRDV_CI_RUN:-0}" = 1 ]; then
  echo "== verbs unit test (device-free): run by .ci/run's make test / asan / tsan"
else
  echo "== verbs unit test (device-free)"
  make --no-print-directory build/default/test_verbs
  ./build/default/test_verbs | tail -n 12
fi
echo "== verbs fuzz (control-message and handshake decoders)"
FUZZ_SECONDS=${FUZZ_SECONDS:-20} make --no-print-directory fuzz-verbs 2>&1 | tail -n 2
echo "== make test-rxe (Soft-RoCE in a QEMU guest)"
make --no-print-directory test-rxe
# the benchmark against perftest (about 5 min) is `make bench-rxe`, run by hand: CI keeps to tests
