#!/usr/bin/env bash
# CI, live TensorFlow interop over gRPC (called by .ci/run after .ci/tf.sh and .ci/grpc.sh; also runs
# alone on a fresh Debian 12 machine as root): installs the gRPC C core and Python's venv module,
# then (tests/tf/setup.sh pip-installs tensorflow-cpu into build/tf-venv first, or reuses it)
#   make interop        TensorFlow <-> tfrdv both directions; then with cache_rpc_response
#   make demo-tf        examples/tf_peer: a C program and a TensorFlow program exchange tensors
#   make bench-tf-grpc  RecvTensor on TF -> TF, tfrdv -> tfrdv, tfrdv -> TF, TF -> tfrdv
# Each must succeed; an interop run must end "N passed, 0 failed" (nothing in it can be skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/apt.sh
ci_install \
  build-essential make pkg-config libgrpc-dev python3 python3-venv python3-pip ca-certificates
pkg-config --exists grpc || { echo "pkg-config cannot find grpc after installing libgrpc-dev"; exit 1; }
log=$(mktemp -d); trap 'rm -rf "$log"' EXIT
echo "== interop"
make --no-print-directory interop 2>&1 | grep -v 'CalculateOutputSize' | tee "$log/interop"
[ "$(grep -Ec '^[0-9]+ passed, 0 failed$' "$log/interop")" = 2 ] || { echo "FAILED: make interop"; exit 1; }
echo "== demo-tf";       make --no-print-directory demo-tf
echo "== bench-tf-grpc"; make --no-print-directory bench-tf-grpc
