# tests/interop/interop.mk - live TensorFlow interop over gRPC. Included by the Makefile; nothing in
# `make test` depends on it. Needs the gRPC C core (apt-get install libgrpc-dev pkg-config) and
# TensorFlow in a venv (tests/tf/setup.sh, the same venv as `make tf-oracle`).
#   make interop        tests/interop/interop.py twice: the main suite, then TensorFlow with
#                       rpc_options.cache_rpc_response (MarkRecvFinished both ways)
#   make bench-tf-grpc  RecvTensor timed on four paths: TensorFlow -> TensorFlow, tfrdv -> tfrdv,
#                       tfrdv -> TensorFlow, TensorFlow -> tfrdv (sender -> receiver), 4 KiB and 64 MiB
#   make demo-tf        examples/tf_peer: a C program and a TensorFlow program exchange a tensor
INTEROP_OUT ?= build/interop
TF_PY = $(TF_VENV)/bin/python

.PHONY: interop bench-tf-grpc demo-tf

$(INTEROP_OUT)/peer: tests/interop/peer.c tfrdv.h tfrdv_grpc.h
	@mkdir -p $(INTEROP_OUT)
	$(SAY) CC $@
	$(Q)$(CC) -std=c99 -O2 -g -Wall -Wextra -Werror -I. $$(pkg-config --cflags grpc) -o $@ $< $$(pkg-config --libs grpc) -lpthread

$(INTEROP_OUT)/tf_peer: examples/tf_peer/tf_peer.c tfrdv.h tfrdv_grpc.h
	@mkdir -p $(INTEROP_OUT)
	$(SAY) CC $@
	$(Q)$(CC) -std=c99 -O2 -Wall -Wextra -Werror -I. $$(pkg-config --cflags grpc) -o $@ $< $$(pkg-config --libs grpc) -lpthread

interop: tf-setup $(INTEROP_OUT)/peer
	@echo "== interop: TensorFlow <-> tfrdv over gRPC (main suite)"
	@$(TF_PY) tests/interop/interop.py --peer $(INTEROP_OUT)/peer
	@echo "== interop: cache_rpc_response + require_ack"
	@$(TF_PY) tests/interop/interop.py --peer $(INTEROP_OUT)/peer --cache

bench-tf-grpc: tf-setup $(INTEROP_OUT)/peer
	@$(TF_PY) bench/bench_tf_grpc.py --peer $(INTEROP_OUT)/peer

demo-tf: tf-setup $(INTEROP_OUT)/tf_peer
	@$(TF_PY) examples/tf_peer/tf_side.py --peer $(INTEROP_OUT)/tf_peer
