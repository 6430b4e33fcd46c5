#!/usr/bin/env bash
# Sets up the TensorFlow oracle toolchain (used by `make tf-oracle` / `make bench-tf`, never by
# `make test`): a Python venv with the tensorflow-cpu wheel, whose tensorflow/include and
# libtensorflow_framework.so.2 the C++ oracle and benchmark build against.
# Idempotent: an existing venv with the right TensorFlow version is reused (no network).
# Writes, for tests/tf/tf.mk:
#   $TF_OUT/cflags    tf.sysconfig.get_compile_flags(), one line
#   $TF_OUT/ldflags   -L<wheel dir> -l:libtensorflow_framework.so.2 -Wl,-rpath,<wheel dir>
#   $TF_OUT/version   the TensorFlow version that was found
# Environment: TF_VENV (default build/tf-venv), TF_OUT (default build/tf), TF_VERSION (2.21.0),
# PYTHON (default python3). Run as root on a machine without the venv module, it apt-get installs
# python3-venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
TF_VERSION=${TF_VERSION:-2.21.0}
TF_VENV=${TF_VENV:-build/tf-venv}
TF_OUT=${TF_OUT:-build/tf}
PYTHON=${PYTHON:-python3}
mkdir -p "$TF_OUT"

have_version() {
    [ -x "$TF_VENV/bin/python" ] &&
        [ "$("$TF_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("tensorflow-cpu"))' 2>/dev/null)" = "$TF_VERSION" ]
}

if ! have_version; then
    if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            echo "setup.sh: installing python3-venv"
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq
            apt-get install -y -qq --no-install-recommends python3-venv python3-pip >/dev/null
        else
            echo "setup.sh: $PYTHON has no venv/ensurepip module; install python3-venv" >&2
            exit 1
        fi
    fi
    if [ ! -x "$TF_VENV/bin/python" ]; then
        echo "setup.sh: creating venv $TF_VENV"
        "$PYTHON" -m venv "$TF_VENV"
    fi
    echo "setup.sh: pip install tensorflow-cpu==$TF_VERSION (a few minutes the first time)"
    "$TF_VENV/bin/python" -m pip install -q --disable-pip-version-check "tensorflow-cpu==$TF_VERSION"
    have_version || { echo "setup.sh: tensorflow-cpu $TF_VERSION not importable after install" >&2; exit 1; }
fi

# tf.sysconfig imports tensorflow (slow, chatty); ask it once and cache the answer next to the venv.
stamp="$TF_OUT/flags.stamp"
if [ ! -s "$TF_OUT/cflags" ] || [ ! -s "$TF_OUT/ldflags" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$TF_VERSION $TF_VENV" ]; then
    TF_CPP_MIN_LOG_LEVEL=3 "$TF_VENV/bin/python" - "$TF_OUT" <<'PY'
import os, sys
import tensorflow as tf
out = sys.argv[1]
lib = os.path.dirname(tf.__file__)
so = os.path.join(lib, "libtensorflow_framework.so.2")
if not os.path.exists(so):
    sys.exit("setup.sh: %s missing from the wheel" % so)
with open(os.path.join(out, "cflags"), "w") as f:
    f.write(" ".join(tf.sysconfig.get_compile_flags()) + "\n")
with open(os.path.join(out, "ldflags"), "w") as f:
    f.write("-L%s -l:libtensorflow_framework.so.2 -Wl,-rpath,%s\n" % (lib, lib))
with open(os.path.join(out, "version"), "w") as f:
    f.write(tf.__version__ + "\n")
PY
    echo "$TF_VERSION $TF_VENV" > "$stamp"
fi
echo "setup.sh: TensorFlow $(cat "$TF_OUT/version") ready; flags in $TF_OUT/cflags, $TF_OUT/ldflags"
