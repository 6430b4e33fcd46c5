#!/usr/bin/env python3
"""interop.py - `make interop`: a live TensorFlow 2.21 worker (tf.distribute.Server, graph mode, raw
_Send/_Recv ops) and a tfrdv gRPC worker (tests/interop/peer.c) in one ClusterSpec, exchanging
tensors over TensorFlow's WorkerService/RecvTensor in both directions.

  TensorFlow receives from tfrdv   a _Recv on TensorFlow's CPU whose send_device is the tfrdv
                                   worker: TensorFlow calls RecvTensor on it; the step id reaches
                                   tfrdv only there (its step_requested hook starts the step).
  tfrdv receives from TensorFlow   a _Send to the tfrdv worker plus a _Recv of its answer: the
                                   answer's RecvTensor tells tfrdv the step id, tfrdv fetches the
                                   tensor (key with TensorFlow's incarnation, learnt by GetStatus),
                                   checks it and sends it back, and TensorFlow checks what came back.

Every value is compared element by element on both sides (peer.c and tfnet.values compute the
same values from the tensor's name). Usage:
  interop.py --peer build/interop/peer            the main suite (with and without device_filters)
  interop.py --peer build/interop/peer --cache    TensorFlow with rpc_options.cache_rpc_response and
                                                  tfrdv with require_ack: MarkRecvFinished both ways
Prints one line per test and "N passed, N failed"; exits 1 on any failure."""
import argparse
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfnet  # noqa: E402
from tfnet import PEER_CPU, TF_CPU, np, tf  # noqa: E402

RUN_TIMEOUT_MS = 120000
results = {"passed": 0, "failed": 0}


def check(name, fn):
    t0 = time.time()
    try:
        why = fn()
    except Exception as e:  # a TensorFlow error is a failure with its text
        why = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        if not isinstance(e, tf.errors.OpError):
            traceback.print_exc()
    if why:
        results["failed"] += 1
        print("[FAIL] %s: %s" % (name, why), flush=True)
    else:
        results["passed"] += 1
        print("[ OK ] %s (%.0f ms)" % (name, (time.time() - t0) * 1e3), flush=True)


class Env:
    def __init__(self, target, inc, tf_inc, peer):
        self.target, self.inc, self.tf_inc, self.peer = target, inc, tf_inc, peer
        self.n = 0

    def run(self, build, feed=None, filters=True):
        """build(g) returns the fetches; a fresh graph and session per run."""
        g = tf.Graph()
        with g.as_default(), tf.device(TF_CPU):
            fetches, feed_vals = build()
        opts = tf.compat.v1.RunOptions(timeout_in_ms=RUN_TIMEOUT_MS)
        with tf.compat.v1.Session(self.target, graph=g, config=tfnet.session_config(filters)) as s:
            return s.run(fetches, feed_dict=feed_vals, options=opts)

    # TensorFlow receives from tfrdv: the tfrdv worker serves what "out.SPEC" names
    def tf_receives(self, spec, filters=True):
        def build():
            return tfnet.recv(tfnet.DTYPES[spec.split(".")[0]], "out." + spec, PEER_CPU, TF_CPU, self.inc, "r"), None
        return tfnet.same(self.run(build, filters=filters), tfnet.values(spec))

    # tfrdv receives from TensorFlow: TensorFlow sends "in.SPEC", tfrdv checks it and echoes it
    def tfrdv_receives(self, spec):
        want = tfnet.values(spec)

        def build():
            x = tf.compat.v1.placeholder(tfnet.DTYPES[spec.split(".")[0]], shape=want.shape)
            s = tfnet.send(x, "in." + spec, TF_CPU, PEER_CPU, self.tf_inc, "s")
            e = tfnet.recv(x.dtype, "echo." + spec, PEER_CPU, TF_CPU, self.inc, "e")
            return [e, s], {x: want}
        return tfnet.same(self.run(build)[0], want)

    # a fetch the peer answers with one int32
    def ack(self, build_send, edge):
        def build():
            s = build_send()
            a = tfnet.recv(tf.int32, edge, PEER_CPU, TF_CPU, self.inc, "ack")
            return [a, s], None
        return int(self.run(build)[0])


SHAPES = ["s", "d0", "d5", "d2x3x1x4", "d3x0"]
DTYPE_NAMES = ["float32", "float64", "int32", "int64", "uint8", "bool", "half", "bfloat16", "string"]


def main_suite(env):
    seed = 0
    for dt in DTYPE_NAMES:
        for sh in SHAPES:
            seed += 1
            spec = "%s.%s.%d" % (dt, sh, seed)
            check("TensorFlow receives %s from tfrdv" % spec, lambda spec=spec: env.tf_receives(spec))
            check("tfrdv receives %s from TensorFlow (and echoes it back)" % spec, lambda spec=spec: env.tfrdv_receives(spec))
    for spec in ["float32.d16777216.3", "uint8.d1024x1024x64.4"]:  # 64 MiB each
        check("TensorFlow receives %s (64 MiB) from tfrdv" % spec, lambda spec=spec: env.tf_receives(spec))
        check("tfrdv receives %s (64 MiB) from TensorFlow" % spec, lambda spec=spec: env.tfrdv_receives(spec))
    # the tfrdv side really compares: a tensor that is not what its name says fails the step there
    def tampered():
        spec = "int32.d4x4.61"
        bad = tfnet.values(spec).copy()
        bad[2, 3] += 1

        def build():
            x = tf.compat.v1.placeholder(tf.int32, shape=bad.shape)
            s = tfnet.send(x, "in." + spec, TF_CPU, PEER_CPU, env.tf_inc, "s")
            return [tfnet.recv(tf.int32, "echo." + spec, PEER_CPU, TF_CPU, env.inc, "e"), s], {x: bad}
        try:
            env.run(build)
        except tf.errors.InternalError as e:
            return "" if "differs" in e.message else "message: " + e.message
        return "the tampered tensor was accepted"
    check("a tensor that differs from what tfrdv expects fails the step with tfrdv's INTERNAL", tampered)
    check("a long string tensor both ways",
          lambda: env.tf_receives("string.d20000.9") or env.tfrdv_receives("string.d20000.9"))

    # dead tensors
    def dead_from_tf():
        def build_send():
            sw = tf.raw_ops.Switch(data=tf.constant([1.0, 2.0]), pred=tf.constant(False))
            return tfnet.send(sw[1], "deadin", TF_CPU, PEER_CPU, env.tf_inc, "s")  # output_true: dead
        got = env.ack(build_send, "ack.dead.deadin")
        return "" if got == 1 else "tfrdv saw is_dead=%d" % got

    def live_from_tf():
        got = env.ack(lambda: tfnet.send(tf.constant([1.0]), "livein", TF_CPU, PEER_CPU, env.tf_inc, "s"), "ack.dead.livein")
        return "" if got == 0 else "tfrdv saw is_dead=%d" % got

    def dead_round_trip():
        def build_send():
            r = tfnet.recv(tf.float32, "rt.out", PEER_CPU, TF_CPU, env.inc, "r")
            return tfnet.send(r, "rt.back", TF_CPU, PEER_CPU, env.tf_inc, "s")
        got = env.ack(build_send, "rt.ack")
        return "" if got == 1 else "the value TensorFlow forwarded was %s" % ("live" if got == 0 else got)
    check("a dead tensor from TensorFlow reaches tfrdv as dead", dead_from_tf)
    check("a live tensor from TensorFlow is not dead (control)", live_from_tf)
    check("a dead tensor from tfrdv is dead in TensorFlow (it forwards deadness back)", dead_round_trip)

    # a wrong incarnation: TensorFlow's ABORTED (WorkerPossiblyRestarted) surfaces in tfrdv with its code
    def wrong_incarnation():
        got = env.ack(lambda: tfnet.send(tf.constant([3], tf.int32), "incx", TF_CPU, PEER_CPU, env.tf_inc, "s"), "ack.inc.incx")
        return "" if got == 10 else "tfrdv got code %d, expected 10 (ABORTED)" % got
    check("a key with a wrong incarnation: tfrdv gets TensorFlow's ABORTED and its restart detail", wrong_incarnation)

    # a tfrdv error reaches session.run with its code
    for code, cls in [(9, tf.errors.FailedPreconditionError), (8, tf.errors.ResourceExhaustedError),
                      (7, tf.errors.PermissionDeniedError)]:
        def err(code=code, cls=cls):
            try:
                env.run(lambda: (tfnet.recv(tf.float32, "err.%d" % code, PEER_CPU, TF_CPU, env.inc, "r"), None))
            except cls as e:
                return "" if "error injected" in e.message else "message: " + e.message
            return "no error"
        check("a tfrdv step aborted with code %d reaches session.run as %s" % (code, cls.__name__), err)

    # without device_filters TensorFlow's master contacts the tfrdv worker: GetStatus, CreateWorkerSession
    def no_filters():
        before = env.peer.stats()
        why = env.tf_receives("float32.d2x3.77", filters=False) or env.tf_receives("int64.d4.78", filters=False)
        after = env.peer.stats()
        if why:
            return why
        if after["status_calls"] <= before["status_calls"] or after["session_calls"] <= before["session_calls"]:
            return "GetStatus %d -> %d, Create/DeleteWorkerSession %d -> %d" % (
                before["status_calls"], after["status_calls"], before["session_calls"], after["session_calls"])
        return ""
    check("TensorFlow without device_filters: GetStatus and CreateWorkerSession on tfrdv, then RecvTensor", no_filters)

    def counters():
        s = env.peer.stats()
        # one failed fetch (the wrong incarnation); no require_ack either way without the cache options
        if s["unimplemented"] or s["calls_failed"] != 1 or s["acks_sent"] or s["acks_received"]:
            return "stats %r" % s
        return ""
    check("the tfrdv worker answered every method TensorFlow called", counters)


def cache_suite(env):
    """TensorFlow with rpc_options.cache_rpc_response=true, tfrdv with require_ack + response cache."""
    def wait_for(field, at_least):
        end = time.time() + 15
        while time.time() < end:
            s = env.peer.stats()
            if s[field] >= at_least:
                return s
            time.sleep(0.05)
        return env.peer.stats()
    before = env.peer.stats()
    check("cache_rpc_response: TensorFlow receives from tfrdv", lambda: env.tf_receives("float32.d7.5"))

    def tf_acks():
        s = wait_for("acks_received", before["acks_received"] + 1)
        return "" if s["acks_received"] > before["acks_received"] else "no MarkRecvFinished from TensorFlow"
    check("require_ack from tfrdv: TensorFlow sends MarkRecvFinished", tf_acks)
    check("cache_rpc_response: tfrdv receives from TensorFlow", lambda: env.tfrdv_receives("int32.d3x2.6"))

    def tfrdv_acks():
        s = wait_for("acks_sent", before["acks_sent"] + 1)
        return "" if s["acks_sent"] > before["acks_sent"] else "tfrdv sent no MarkRecvFinished"
    check("require_ack from TensorFlow: tfrdv sends MarkRecvFinished", tfrdv_acks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True)
    ap.add_argument("--cache", action="store_true")
    a = ap.parse_args()
    tfnet.watchdog(1200)
    tf_port, peer_port = tfnet.free_port(), tfnet.free_port()
    peer = tfnet.Peer(a.peer, peer_port, tf_port, ["--require-ack"] if a.cache else [])
    srv = tfnet.server(tf_port, peer_port, cache=a.cache)
    inc, tf_inc = peer.ready()
    # the incarnation tfrdv read with GetStatus is the one TensorFlow lists for its CPU
    with tf.compat.v1.Session(srv.target, config=tfnet.session_config()) as s:
        listed = [d.incarnation for d in s.list_devices() if d.name == TF_CPU]
    print("TensorFlow %s on :%d (CPU incarnation %016x), tfrdv worker on :%d (incarnation %016x)%s"
          % (tf.__version__, tf_port, tf_inc, peer_port, inc, ", cache_rpc_response + require_ack" if a.cache else ""),
          flush=True)
    check("tfrdv's GetStatus read TensorFlow's CPU incarnation",
          lambda: "" if [x % (1 << 64) for x in listed] == [tf_inc] else "TensorFlow lists %r" % listed)
    env = Env(srv.target, inc, tf_inc, peer)
    (cache_suite if a.cache else main_suite)(env)
    rc = peer.quit()
    check("the tfrdv worker shut down cleanly", lambda: "" if rc == 0 else "exit code %s" % rc)
    print("%d passed, %d failed" % (results["passed"], results["failed"]), flush=True)
    sys.stdout.flush()
    os._exit(1 if results["failed"] else 0)  # TensorFlow's server threads never join


if __name__ == "__main__":
    main()
