#!/usr/bin/env python3
"""bench_tf_grpc.py - `make bench-tf-grpc`: RecvTensor over gRPC on loopback, 4 KiB and 64 MiB float32
tensors, on four paths (sender -> receiver), measured in one run:

  TF -> TF        two tf.distribute.Server processes (tasks 0 and 1 of job "tf")
  tfrdv -> tfrdv  two tfrdv_grpc workers (tests/interop/peer.c, the second with --fetch-bench):
                  into fresh memory per receive, as TensorFlow does, and into the receiver's own
                  reused buffer (tfrdv_args.alloc_fn: what a runtime with a preallocated arena gets;
                  fresh memory on this VM costs ~2.5 us per 4 KiB page fault, 40 ms per 64 MiB)
  tfrdv -> TF     TensorFlow's task 0 receives from the tfrdv worker
  TF -> tfrdv     the tfrdv worker receives from TensorFlow's task 0

What is timed, on every path: one RecvTensor whose value is already buffered at the sender, from
the moment the receiving op starts until the tensor is in the receiver's memory. The whole
session.run is NOT timed (it adds the master's RunGraph round trips, and for TF -> TF a second
worker's step start). How:
  - TensorFlow receiving: the graph has the sender put the tensor, then a small "ready" tensor;
    the timed _Recv has a control dependency on the _Recv of "ready", so it starts when the data
    is already buffered. Its duration is TensorFlow's own node timing (RunOptions FULL_TRACE,
    step_stats: the _Recv node's all_end_rel_micros, microsecond resolution).
  - tfrdv receiving: tfrdv_recv_async -> done callback on the receiving worker's clock; from
    TensorFlow, the fetch starts when TensorFlow asks for the answer, which its graph orders after
    the _Send (control dependency); from tfrdv, after the "ready" fetch (peer.c's pair rule).
Figures: median over all repetitions (min shown); throughput = bytes / median time. The paths run
in 3 interleaved rounds; the target ratios (tfrdv -> tfrdv against TF -> TF: latency (4 KiB)
tfrdv / TF time, target <= 0.8; throughput (64 MiB) tfrdv / TF, target >= 1.5) are the median of
the rounds' ratios. Never asserts timings; exits non-zero only when a path fails."""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "interop"))
import tfnet  # noqa: E402
from tfnet import PEER_CPU, TF_CPU, tf  # noqa: E402

TF1_CPU = "/job:tf/replica:0/task:1/device:CPU:0"
SIZES = [(4096, 300), (64 << 20, 12)]  # bytes, repetitions
REUSE = "tfrdv -> tfrdv, receiver's buffer"
ROUNDS = 3  # each size: the paths run one after another, three times over


def task1_main(tf_port, tf1_port, peer_port):
    cluster = tf.train.ClusterSpec({"tf": ["127.0.0.1:%d" % tf_port, "127.0.0.1:%d" % tf1_port],
                                    "peer": ["127.0.0.1:%d" % peer_port]})
    tf.distribute.Server(cluster, job_name="tf", task_index=1, start=True).join()


def recv_tensor_us(md, edge):
    """TensorFlow's own record of one RecvTensor RPC on the receiving worker (its WorkerCacheLogger,
    on while a run is traced): the "RecvTensor" entry whose label names the edge, from issuing
    the call to the parsed response."""
    for dev in md.step_stats.dev_stats:
        for ns in dev.node_stats:
            if ns.node_name == "RecvTensor" and (" %s from " % edge) in ns.timeline_label:
                return float(ns.all_end_rel_micros)
    raise RuntimeError("no RecvTensor entry for %s in the step stats" % edge)


def tf_receives(sess_target, src_cpu, src_inc, n, reps, ready_edge, data_edge, setup_sender=None):
    """Times TensorFlow task 0's _Recv of data_edge, ordered after its _Recv of ready_edge."""
    g = tf.Graph()
    targets = []
    with g.as_default():
        init = None
        if setup_sender:
            init, targets = setup_sender(n)
        with tf.device(TF_CPU):
            rd = tfnet.recv(tf.int32, ready_edge, src_cpu, TF_CPU, src_inc, "rd")
            with tf.control_dependencies([rd]):
                rx = tfnet.recv(tf.float32, data_edge, src_cpu, TF_CPU, src_inc, "rx")
    opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE, timeout_in_ms=120000)
    out = []
    with tf.compat.v1.Session(sess_target, graph=g, config=tfnet.session_config(optimize=False)) as s:
        if init is not None:
            s.run(init)
        for i in range(reps + 1):
            md = tf.compat.v1.RunMetadata()
            s.run([rx.op] + targets, options=opts, run_metadata=md)
            if i:  # the first run warms the channel and the graph
                out.append(recv_tensor_us(md, data_edge))
    return out


def row(name, times, nbytes):
    med = statistics.median(times)
    return {"name": name, "bytes": nbytes, "median_us": med, "min_us": min(times), "n": len(times),
            "mbps": nbytes / med if med > 0 else 0.0}  # bytes per us = MB/s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True)
    ap.add_argument("--task1", nargs=3, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    a = ap.parse_args()
    if a.task1:
        return task1_main(*a.task1)
    tfnet.watchdog(1500)
    sizes = [(b, max(3, r // 10)) for b, r in SIZES] if a.quick else SIZES
    tf_port, tf1_port, peer_port = tfnet.free_port(), tfnet.free_port(), tfnet.free_port()
    task1 = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--peer", a.peer, "--task1",
                              str(tf_port), str(tf1_port), str(peer_port)])
    peer = tfnet.Peer(a.peer, peer_port, tf_port)
    cluster = tf.train.ClusterSpec({"tf": ["127.0.0.1:%d" % tf_port, "127.0.0.1:%d" % tf1_port],
                                    "peer": ["127.0.0.1:%d" % peer_port]})
    srv = tf.distribute.Server(cluster, job_name="tf", task_index=0, start=True)
    inc, tf_inc = peer.ready()
    with tf.compat.v1.Session(srv.target, config=tfnet.session_config(optimize=False)) as s:
        tf1_inc = [d.incarnation for d in s.list_devices() if d.name == TF1_CPU][0] % (1 << 64)
    print("RecvTensor on 127.0.0.1, TensorFlow %s, %d CPUs, load average %.2f; sender -> receiver; value already "
          "buffered at the sender; medians of all repetitions, ratios: median of 3 interleaved rounds" % (tf.__version__, os.cpu_count(), os.getloadavg()[0]), flush=True)
    def tf_to_tf(n, reps):  # task 1 holds the tensor in a variable, sends it, then sends "ready"
        def task1_sender(n):
            with tf.device(TF1_CPU):
                v = tf.compat.v1.Variable(tf.ones([n], tf.float32), name="v")
                s1 = tfnet.send(v.read_value(), "tt.data", TF1_CPU, TF_CPU, tf1_inc, "s1")
                with tf.control_dependencies([s1]):
                    s2 = tfnet.send(tf.constant(1), "tt.ready", TF1_CPU, TF_CPU, tf1_inc, "s2")
            return v.initializer, [s1, s2]
        return tf_receives(srv.target, TF1_CPU, tf1_inc, n, reps, "tt.ready", "tt.data", task1_sender)

    def tfrdv_to_tfrdv(n, reps, extra=()):  # a second tfrdv worker fetches pair.data after pair.ready
        p2 = subprocess.run([a.peer, "--fetch-bench", "127.0.0.1:%d" % peer_port, "--spec", "float32.d%d.1" % n,
                             "--reps", str(reps)] + list(extra), capture_output=True, text=True, timeout=600)
        line = [ln for ln in p2.stdout.splitlines() if ln.startswith("TIMES")]
        if p2.returncode or not line:
            raise RuntimeError(p2.stderr.strip() or "no TIMES line")
        return tfnet.parse_times(dict(kv.split("=") for kv in line[0].split()[1:]))

    def tfrdv_to_tf(n, reps):  # TensorFlow task 0 receives from the tfrdv worker (pair rule)
        spec = "float32.d%d.1" % n
        return tf_receives(srv.target, PEER_CPU, inc, n, reps, "pair.ready." + spec, "pair.data." + spec)

    def tf_to_tfrdv(n, reps):  # the tfrdv worker times its fetch; TensorFlow asks for the answer after its _Send
        g = tf.Graph()
        with g.as_default(), tf.device(TF_CPU):
            v = tf.compat.v1.Variable(tf.ones([n], tf.float32), name="v")
            s1 = tfnet.send(v.read_value(), "tx.data", TF_CPU, PEER_CPU, tf_inc, "s1")
            with tf.control_dependencies([s1]):
                ack = tfnet.recv(tf.int32, "ack.time.tx.data", PEER_CPU, TF_CPU, inc, "ack")
        with tf.compat.v1.Session(srv.target, graph=g, config=tfnet.session_config(optimize=False)) as s:
            s.run(v.initializer)
            s.run([ack, s1])
            peer.times()  # drop the warm-up
            for _ in range(reps):
                s.run([ack, s1], options=tf.compat.v1.RunOptions(timeout_in_ms=120000))
        return peer.times()

    paths = [("TF -> TF", tf_to_tf), ("tfrdv -> tfrdv", tfrdv_to_tfrdv),
             (REUSE, lambda n, reps: tfrdv_to_tfrdv(n, reps, ["--reuse"])),
             ("tfrdv -> TF", tfrdv_to_tf), ("TF -> tfrdv", tf_to_tfrdv)]
    times = {}   # (path, bytes) -> every time
    rounds = {}  # (path, bytes) -> the median of each round
    rc = 0
    for nbytes, reps in sizes:
        # rounds interleave the paths, so a change of machine load hits all of them alike
        for _ in range(ROUNDS):
            for name, fn in paths:
                try:
                    t = fn(nbytes // 4, max(1, reps // ROUNDS))
                except Exception as e:
                    print("%s, %d bytes failed: %s" % (name, nbytes, str(e).splitlines()[0] if str(e) else e))
                    rc = 1
                    continue
                times.setdefault((name, nbytes), []).extend(t)
                rounds.setdefault((name, nbytes), []).append(statistics.median(t))
    rows = [row(name, times[(name, nbytes)], nbytes) for nbytes, _ in sizes for name, _ in paths if (name, nbytes) in times]

    print()
    print("| path (sender -> receiver) | size | median (us) | min (us) | MB/s | n |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %.1f | %.1f | %.0f | %d |" % (r["name"], "4 KiB" if r["bytes"] == 4096 else "64 MiB",
                                                       r["median_us"], r["min_us"], r["mbps"], r["n"]))
    by = {(r["name"], r["bytes"]): r for r in rows}
    print()
    print("| target: tfrdv -> tfrdv vs TF -> TF | TF -> TF | tfrdv -> tfrdv | ratio | goal | met |")
    print("|---|---|---|---|---|---|")
    for name in ["tfrdv -> tfrdv", REUSE]:
        label = "fresh memory per receive" if name == "tfrdv -> tfrdv" else "receiver's buffer (alloc hook)"
        for nbytes, what, goal in [(4096, "latency 4 KiB", 0.8), (64 << 20, "throughput 64 MiB", 1.5)]:
            t, f = by.get(("TF -> TF", nbytes)), by.get((name, nbytes))
            rt, rf = rounds.get(("TF -> TF", nbytes), []), rounds.get((name, nbytes), [])
            if not (t and f and len(rt) == len(rf)):
                continue
            # the median over the rounds of each round's ratio (both measured back to back)
            if nbytes == 4096:
                ratio = statistics.median([y / x for x, y in zip(rt, rf)])
                met = ratio <= goal
                print("| %s, %s (tfrdv / TF time) | %.1f us | %.1f us | %.2fx | <= %.1fx | %s |"
                      % (what, label, t["median_us"], f["median_us"], ratio, goal, "yes" if met else "NO"))
            else:
                ratio = statistics.median([x / y for x, y in zip(rt, rf)])
                met = ratio >= goal
                print("| %s, %s (tfrdv / TF MB/s) | %.0f MB/s | %.0f MB/s | %.2fx | >= %.1fx | %s |"
                      % (what, label, t["mbps"], f["mbps"], ratio, goal, "yes" if met else "NO"))
    sys.stdout.flush()
    peer.quit()
    task1.kill()
    os._exit(rc)


if __name__ == "__main__":
    main()
