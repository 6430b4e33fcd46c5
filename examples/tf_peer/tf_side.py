"""tf_side.py - the TensorFlow half of examples/tf_peer: a TensorFlow worker and a C program using
tfrdv (tf_peer.c) exchange tensors over gRPC, TensorFlow's WorkerService/RecvTensor.

    python tf_side.py --peer ./tf_peer         starts the C program itself (make demo-tf)
    python tf_side.py                          the C program runs elsewhere: ./tf_peer in another
                                               terminal, same ports (defaults 2222 and 2223)

The cluster has two jobs: "tf" (this process: master and worker) and "tfrdv" (the C program). The
graph uses TensorFlow's raw _Recv/_Send ops, whose keys name both devices and the sending device's
incarnation:
    x = _Recv("x_from_c")  from the C program
    y = x * 10             computed here
    _Send(y, "y_from_tf")  the C program fetches it (RecvTensor on this worker)
    done = _Recv("done_from_c")  1 once the C program checked y; keeps the step alive until then
"""
import argparse
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import op_def_library  # noqa: E402

TF_CPU = "/job:tf/replica:0/task:0/device:CPU:0"
C_CPU = "/job:tfrdv/replica:0/task:0/device:CPU:0"


def signed(incarnation):  # a uint64 incarnation as the int64 a graph attribute holds
    return incarnation - (1 << 64) if incarnation >= (1 << 63) else incarnation


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=2222, help="this TensorFlow worker")
    ap.add_argument("--peer-port", type=int, default=2223, help="the C program")
    ap.add_argument("--peer", help="start this tf_peer binary")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    tf.compat.v1.disable_eager_execution()
    cluster = tf.train.ClusterSpec({"tf": ["127.0.0.1:%d" % a.port], "tfrdv": ["127.0.0.1:%d" % a.peer_port]})
    server = tf.distribute.Server(cluster, job_name="tf", task_index=0)
    peer = None
    if a.peer:
        peer = subprocess.Popen([a.peer, "--listen", "127.0.0.1:%d" % a.peer_port, "--tf", "127.0.0.1:%d" % a.port])
    print("waiting for the C side (tf_peer) on 127.0.0.1:%d" % a.peer_port)
    sys.stdout.flush()

    # Every device of the cluster with its incarnation: TensorFlow asks each worker (GetStatus),
    # the C program included.
    with tf.compat.v1.Session(server.target) as s:
        incarnation = {d.name: d.incarnation for d in s.list_devices()}
    print("devices:", ", ".join("%s (incarnation %016x)" % (n, i % (1 << 64)) for n, i in sorted(incarnation.items())))

    g = tf.Graph()
    with g.as_default(), tf.device(TF_CPU):
        x = op_def_library._apply_op_helper(
            "_Recv", name="x", tensor_type=tf.float32, tensor_name="x_from_c", send_device=C_CPU,
            send_device_incarnation=signed(incarnation[C_CPU]), recv_device=TF_CPU, client_terminated=False)[3][0]
        y = x * 10
        send_y = op_def_library._apply_op_helper(
            "_Send", name="send_y", tensor=y, tensor_name="y_from_tf", send_device=TF_CPU,
            send_device_incarnation=signed(incarnation[TF_CPU]), recv_device=C_CPU, client_terminated=False)[2]
        done = op_def_library._apply_op_helper(
            "_Recv", name="done", tensor_type=tf.int32, tensor_name="done_from_c", send_device=C_CPU,
            send_device_incarnation=signed(incarnation[C_CPU]), recv_device=TF_CPU, client_terminated=False)[3][0]
    ok = True
    # device_filters: the master contacts only its own job; the C program is reached by RecvTensor
    config = tf.compat.v1.ConfigProto(device_filters=["/job:tf"])
    with tf.compat.v1.Session(server.target, graph=g, config=config) as s:
        for step in range(a.steps):
            xv, dv, _ = s.run([x, done, send_y], options=tf.compat.v1.RunOptions(timeout_in_ms=60000))
            good = np.array_equal(xv, np.arange(1, 7, dtype=np.float32).reshape(2, 3)) and dv == 1
            ok = ok and good
            print("TensorFlow step %d: x from C = %s, C says y was %s" % (step, xv.tolist(), "right" if dv == 1 else "WRONG"))
    if peer:
        peer.terminate()  # SIGTERM: tf_peer shuts down cleanly and exits 0
        ok = peer.wait(30) == 0 and ok
    print("OK" if ok else "FAILED")
    sys.stdout.flush()
    os._exit(0 if ok else 1)  # TensorFlow's server threads never join


if __name__ == "__main__":
    main()
