"""tfnet.py - what tests/interop/interop.py and bench/bench_tf_grpc.py share: free ports, the tfrdv
peer process (tests/interop/peer.c), the values a SPEC names (the same function as peer.c's), and
TensorFlow graphs built from raw _Send/_Recv ops.

A SPEC is DTYPE.SHAPE.SEED, e.g. "float32.d2x3.5" or "string.s.1" (see peer.c)."""
import os
import select
import socket
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import op_def_library  # noqa: E402

tf.compat.v1.disable_eager_execution()

TF = "/job:tf/replica:0/task:0"
TF_CPU = TF + "/device:CPU:0"
PEER = "/job:peer/replica:0/task:0"
PEER_CPU = PEER + "/device:CPU:0"

DTYPES = {
    "float32": tf.float32, "float64": tf.float64, "int32": tf.int32, "int64": tf.int64,
    "uint8": tf.uint8, "bool": tf.bool, "half": tf.float16, "bfloat16": tf.bfloat16,
    "string": tf.string,
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def signed64(x):
    """A uint64 incarnation as the int64 a NodeDef attr holds."""
    return x - (1 << 64) if x >= (1 << 63) else x


def parse_spec(spec):
    dtype, shape, seed = spec.split(".")
    dims = () if shape == "s" else tuple(int(d) for d in shape[1:].split("x"))
    return dtype, dims, int(seed)


def values(spec):
    """The numpy array SPEC names (peer.c computes the same values)."""
    dtype, dims, seed = parse_spec(spec)
    n = int(np.prod(dims)) if dims else 1
    i = np.arange(n, dtype=np.int64)
    small = ((i * 37 + seed * 11) % 200 - 100) * 0.5
    u = i.astype(np.uint64)
    if dtype == "float32":
        a = (small * 0.5).astype(np.float32)
    elif dtype == "float64":
        a = small * 0.25 + 1e6
    elif dtype == "int32":
        a = ((u * np.uint64(2654435761) + np.uint64(seed)) & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)
    elif dtype == "int64":
        a = ((u + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)).view(np.int64)
    elif dtype == "uint8":
        a = ((i * 37 + seed) & 255).astype(np.uint8)
    elif dtype == "bool":
        a = (i * 7 + seed) % 3 == 0
    elif dtype == "half":
        a = small.astype(np.float16)
    elif dtype == "bfloat16":
        a = small.astype(np.float32).astype(tf.bfloat16.as_numpy_dtype)
    elif dtype == "string":
        a = np.array([bytes(ord("a") + (k + j + seed) % 26 for j in range((k * 7 + seed) % 9)) for k in range(n)],
                     dtype=object)
    else:
        raise ValueError(spec)
    return a.reshape(dims)


def same(got, want):
    """Element by element (bit patterns for the 16-bit floats, bytes for strings)."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return "shape %s, expected %s" % (got.shape, want.shape)
    if want.dtype == object:
        bad = [k for k, (x, y) in enumerate(zip(got.ravel(), want.ravel())) if x != y]
    else:
        if got.dtype != want.dtype:
            return "dtype %s, expected %s" % (got.dtype, want.dtype)
        g, w = got.ravel(), want.ravel()
        if want.dtype.itemsize == 2:
            g, w = g.view(np.uint16), w.view(np.uint16)
        bad = np.nonzero(g != w)[0]
    if len(bad):
        k = int(bad[0])
        return "%d elements differ, first at %d: %r vs %r" % (len(bad), k, got.ravel()[k], want.ravel()[k])
    return ""


def send(t, name, src, dst, incarnation, op_name):
    return op_def_library._apply_op_helper(
        "_Send", name=op_name, tensor=t, tensor_name=name, send_device=src,
        send_device_incarnation=signed64(incarnation), recv_device=dst, client_terminated=False)[2]


def recv(dtype, name, src, dst, incarnation, op_name):
    return op_def_library._apply_op_helper(
        "_Recv", name=op_name, tensor_type=dtype, tensor_name=name, send_device=src,
        send_device_incarnation=signed64(incarnation), recv_device=dst, client_terminated=False)[3][0]


def parse_times(d):
    return [float(x) for x in d.get("all", "").split(",") if x]


class Peer:
    """The tfrdv worker process: started before TensorFlow, READY once TensorFlow's GetStatus
    answered."""

    def __init__(self, exe, port, tf_port, extra=()):
        self.p = subprocess.Popen([exe, "--listen", "127.0.0.1:%d" % port, "--tf", "127.0.0.1:%d" % tf_port] + list(extra),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.port = port

    def _line(self, prefix, timeout):
        end = time.time() + timeout
        while time.time() < end:
            r, _, _ = select.select([self.p.stdout], [], [], max(0.0, end - time.time()))
            if not r:
                break
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("the tfrdv peer exited (code %s)" % self.p.poll())
            if line.startswith(prefix):
                return dict(kv.split("=") for kv in line.split()[1:])
        raise RuntimeError("no %s line from the tfrdv peer within %d s" % (prefix, timeout))

    def ready(self, timeout=120):
        d = self._line("READY", timeout)
        return int(d["incarnation"], 16), int(d["tf_incarnation"], 16)

    def ask(self, what, prefix):
        self.p.stdin.write(what + "\n")
        self.p.stdin.flush()
        return self._line(prefix, 30)

    def stats(self):
        return {k: int(v) for k, v in self.ask("stats", "STATS").items()}

    def times(self):
        """The fetch times (us) the peer recorded since the last call."""
        return parse_times(self.ask("times", "TIMES"))

    def quit(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass
        try:
            return self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return -9


def server(tf_port, peer_port, cache=False):
    """TensorFlow's worker + master, task 0 of job "tf", in a cluster with the tfrdv peer."""
    cluster = tf.train.ClusterSpec({"tf": ["127.0.0.1:%d" % tf_port], "peer": ["127.0.0.1:%d" % peer_port]})
    cfg = tf.compat.v1.ConfigProto()
    if cache:
        cfg.rpc_options.cache_rpc_response = True
    return tf.distribute.Server(cluster, job_name="tf", task_index=0, config=cfg, start=True)


def session_config(filters=True, optimize=True):
    """device_filters: TensorFlow's master then contacts only its own job (the tfrdv worker only
    through RecvTensor). optimize=False turns grappler off: it has nothing to do on raw
    _Send/_Recv graphs but log shape-inference errors about them."""
    cfg = tf.compat.v1.ConfigProto(device_filters=["/job:tf"]) if filters else tf.compat.v1.ConfigProto()
    if not optimize:
        cfg.graph_options.rewrite_options.disable_meta_optimizer = True
    return cfg


def watchdog(seconds):
    """A run that hangs is a failure, not a stuck CI job."""
    import threading

    def die():
        sys.stderr.write("watchdog: no result after %d s\n" % seconds)
        sys.stderr.flush()
        os._exit(3)

    t = threading.Timer(seconds, die)
    t.daemon = True
    t.start()
