#!/usr/bin/python3
"""Conformance peer for tfrdv_grpc.h: Debian's python3-grpcio + python3-protobuf with message
classes compiled by Debian's protoc from tests/grpc/worker_subset.proto (TensorFlow's field
numbers). Nothing here shares code with tfrdv: protobuf encodes and parses every byte.

  peer.py fetch ADDR STEP INCARNATION EDGE,EDGE,...   fetch from a tfrdv server, print what arrived
  peer.py serve PORTFILE                               serve RecvTensor/GetStatus/MarkRecvFinished;
                                                       writes the port, on SIGTERM "acks N"

TFRDV_PEER_PB names the directory holding worker_subset_pb2.py.
"""
import os
import random
import signal
import struct
import sys
from concurrent import futures

sys.path.insert(0, os.environ.get("TFRDV_PEER_PB", "build/default/grpc_py"))
import grpc  # noqa: E402
import worker_subset_pb2 as w  # noqa: E402

PS_DEV = "/job:ps/replica:0/task:0/device:CPU:0"
WK_DEV = "/job:worker/replica:0/task:0/device:CPU:0"
SVC = "/tensorflow.WorkerService/"
RESTARTED = "type.googleapis.com/tensorflow.distributed_runtime.WorkerPossiblyRestarted"
PEER_INC = 0x1234567890ABCDEF


def key(inc, edge):
    return "%s;%016x;%s;%s;0:0" % (PS_DEV, inc, WK_DEV, edge)


def fetch(addr, step, inc, edges):
    ch = grpc.insecure_channel(addr, options=[("grpc.max_receive_message_length", -1)])
    status = ch.unary_unary(SVC + "GetStatus", request_serializer=w.GetStatusRequest.SerializeToString,
                            response_deserializer=w.GetStatusResponse.FromString)
    recv = ch.unary_unary(SVC + "RecvTensor", request_serializer=w.RecvTensorRequest.SerializeToString,
                          response_deserializer=w.RecvTensorResponse.FromString)
    st = status(w.GetStatusRequest(), timeout=10)
    for d in st.device_attributes:
        print("status %s %s %s" % (d.name, d.device_type, "inc-ok" if d.incarnation == inc else "inc-BAD"))
    for edge in edges:
        rid = random.randint(1, 2**63 - 1)
        r = recv(w.RecvTensorRequest(step_id=step, rendezvous_key=key(inc, edge), request_id=rid), timeout=10)
        t = r.tensor
        print("%s dtype=%d shape=%s dead=%d ack=%d content=%s" % (edge, t.dtype, [d.size for d in t.tensor_shape.dim],
                                                                   int(r.is_dead), int(r.require_ack), t.tensor_content.hex()))
    try:
        recv(w.RecvTensorRequest(step_id=step, rendezvous_key=key(inc + 1, edges[0]), request_id=0), timeout=10)
        print("mismatch code=OK")
    except grpc.RpcError as e:
        restarted = 0
        for k, v in (e.trailing_metadata() or ()):
            if k == "grpc-status-details-bin":
                c = w.GrpcPayloadContainer.FromString(v)
                restarted = int(RESTARTED in c.payloads)
        print("mismatch code=%s restarted=%d" % (e.code().name, restarted))
    ch.close()


def serve(portfile):
    acks = [0]

    def recv_tensor(req, ctx):
        edge = req.rendezvous_key.split(";")[3]
        r = w.RecvTensorResponse(send_start_micros=1)
        t = r.tensor
        if edge == "content_f32":
            t.dtype = 1
            t.tensor_shape.dim.add(size=2)
            t.tensor_shape.dim.add(size=2)
            t.tensor_content = struct.pack("<4f", 1, 2, 3, 4)
        elif edge == "typed_f32":
            t.dtype = 1
            t.tensor_shape.dim.add(size=4)
            t.float_val.append(2.5)
            r.require_ack = True
        elif edge == "typed_i64":
            t.dtype = 9
            t.tensor_shape.dim.add(size=3)
            t.int64_val.extend([-1, 0, 7])
        elif edge == "strings":
            t.dtype = 7
            t.tensor_shape.dim.add(size=2)
            t.string_val.extend([b"x", b"yz"])
        elif edge == "bad_content":  # hostile: 5 bytes of content for float32 [3]
            t.dtype = 1
            t.tensor_shape.dim.add(size=3)
            t.tensor_content = b"12345"
        elif edge == "huge_dims":  # hostile: 2^40 floats announced in a few bytes
            t.dtype = 1
            t.tensor_shape.dim.add(size=1 << 40)
            t.float_val.append(1.0)
        elif edge.startswith("details_"):  # ABORTED with a grpc-status-details-bin payload
            url = RESTARTED.encode()
            if edge == "details_tf":  # TensorFlow's: GrpcPayloadContainer {payloads: {url: ""}}
                c = w.GrpcPayloadContainer()
                c.payloads[RESTARTED] = b""
                details = c.SerializeToString()
            else:  # hostile: the type name inside the message field of a google.rpc.Status
                details = b"\x08\x0a\x12" + bytes([len(url)]) + url
            ctx.set_trailing_metadata((("grpc-status-details-bin", details),))
            ctx.abort(grpc.StatusCode.ABORTED, "details " + edge)
        elif edge == "dead":
            r.is_dead = True
            t.dtype = 1
            t.tensor_shape.dim.add(size=0)
        else:
            ctx.abort(grpc.StatusCode.NOT_FOUND, "no tensor " + edge)
        return r

    def get_status(req, ctx):
        r = w.GetStatusResponse()
        r.device_attributes.add(name=PS_DEV, device_type="CPU", incarnation=PEER_INC, xla_global_id=-1)
        return r

    def mark(req, ctx):
        acks[0] += 1
        return w.MarkRecvFinishedResponse()

    h = grpc.method_handlers_generic_handler("tensorflow.WorkerService", {
        "RecvTensor": grpc.unary_unary_rpc_method_handler(
            recv_tensor, request_deserializer=w.RecvTensorRequest.FromString,
            response_serializer=w.RecvTensorResponse.SerializeToString),
        "GetStatus": grpc.unary_unary_rpc_method_handler(
            get_status, request_deserializer=w.GetStatusRequest.FromString,
            response_serializer=w.GetStatusResponse.SerializeToString),
        "MarkRecvFinished": grpc.unary_unary_rpc_method_handler(
            mark, request_deserializer=w.MarkRecvFinishedRequest.FromString,
            response_serializer=w.MarkRecvFinishedResponse.SerializeToString),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((h,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.rename(tmp, portfile)

    def stop(signum, frame):
        server.stop(0)
        with open(portfile, "w") as f:
            f.write("acks %d\n" % acks[0])
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    server.wait_for_termination()


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "fetch":
        fetch(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(","))
    elif len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        sys.exit(__doc__)
