#!/usr/bin/env bash
# CI for the gRPC companion (tfrdv_grpc.h) on a fresh Debian 12 machine: installs the gRPC C core,
# protoc, Debian's Python grpcio/protobuf (the conformance peer) and openssl (TLS material), then
# runs the two-process test (plain, ASan+UBSan, TSan), the decoder fuzzer (bounded), the demo and
# the benchmark. `make test` (run by .ci/run) also runs build/default/test_grpc once these
# packages are installed.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/apt.sh
ci_install \
  build-essential make clang libclang-rt-14-dev pkg-config libgrpc-dev protobuf-compiler \
  python3 python3-grpcio python3-protobuf openssl
pkg-config --exists grpc || { echo "pkg-config cannot find grpc after installing libgrpc-dev"; exit 1; }
/usr/bin/python3 -c 'import grpc, google.protobuf' || { echo "Debian's python3-grpcio/python3-protobuf not importable"; exit 1; }
# TSan needs the old mmap randomisation on newer kernels; harmless where it is already low.
if [ "$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 0)" -gt 28 ]; then
  $SUDO sysctl -w vm.mmap_rnd_bits=28 > /dev/null 2>&1 || true
fi
check() { # the last line of a test run must be "N passed, 0 failed", and the peer must have run
  local log=$1
  tail -n 1 "$log" | grep -Eq '^[0-9]+ passed, 0 failed$' || { echo "FAILED: $(tail -n 1 "$log")"; exit 1; }
  if grep -q '^\[SKIP\]' "$log"; then echo "FAILED: a part was skipped"; grep '^\[SKIP\]' "$log"; exit 1; fi
}
log=$(mktemp -d); trap 'rm -rf "$log"' EXIT
if [ "${TFRDV_CI_RUN:-0}" = 1 ]; then
  # .ci/run's make test, make asan and make tsan run build/*/test_grpc (the same sources and flags)
  echo "== test_grpc plain, ASan, TSan: run by .ci/run's make test / asan / tsan"
else
  echo "== test_grpc";       make --no-print-directory build/default/test_grpc && build/default/test_grpc | tee "$log/plain"; check "$log/plain"
  echo "== test_grpc asan";  make --no-print-directory grpc-asan | tee "$log/asan"; check "$log/asan"
  echo "== test_grpc tsan";  make --no-print-directory grpc-tsan | tee "$log/tsan"; check "$log/tsan"
fi
echo "== fuzz_grpc";       FUZZ_SECONDS=${FUZZ_SECONDS:-30} make --no-print-directory fuzz-grpc
echo "== demo-grpc";       make --no-print-directory demo-grpc
echo "== bench-grpc";      make --no-print-directory bench-grpc
