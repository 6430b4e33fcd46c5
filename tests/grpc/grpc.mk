# tests/grpc/grpc.mk - the gRPC companion (tfrdv_grpc.h), included at the end of the Makefile.
#   make test          also builds and runs $(B)/test_grpc, $(B)/test_multi (one manager routed
#                      over gRPC and tfrdv_tcp.h at once; also in make asan/tsan), $(B)/test_grpc_adversary
#                      (the live transport attacked; also in make asan/tsan) and
#                      $(B)/test_grpc_conformance (tests/conformance.h) and $(B)/ex_grpc_workers when
#                      `pkg-config --exists grpc` succeeds (apt-get install libgrpc-dev pkg-config);
#                      otherwise it prints a [SKIP] line naming the packages
#   make grpc-asan     the two-process test under ASan+UBSan (clang)
#   make grpc-tsan     the two-process test under TSan (clang)
#   make fuzz-grpc     libFuzzer on the wire decoders (FUZZ_SECONDS, default 60; needs no gRPC)
#   make bench-grpc    RecvTensor vs a raw C-core echo vs loopback TCP, plain and TLS (ratios)
#   make demo-grpc     two worker processes fetching tensors from each other, a trace table
# The Python conformance peer uses Debian's interpreter, /usr/bin/python3 (python3-grpcio,
# python3-protobuf), not the python3 first on PATH, which may not see Debian's packages; override
# with PEER_PY=... . Its message classes come from Debian's protoc (protobuf-compiler).
GRPC_OK := $(shell pkg-config --exists grpc 2> /dev/null && echo 1)
PEER_PY ?= /usr/bin/python3
GRPC_PKGS := libgrpc-dev pkg-config protobuf-compiler python3-grpcio python3-protobuf openssl

.PHONY: grpc-skip grpc-asan grpc-tsan fuzz-grpc bench-grpc demo-grpc

fuzz-grpc:
	@bash tests/grpc/fuzz.sh

ifeq ($(GRPC_OK),1)
GRPC_CFLAGS := $(shell pkg-config --cflags grpc)
GRPC_LIBS   := $(shell pkg-config --libs grpc) -lpthread
PEER_OK     := $(shell $(PEER_PY) -c 'import grpc, google.protobuf' > /dev/null 2>&1 && command -v protoc > /dev/null && echo 1)
CERTS_OK    := $(shell command -v openssl > /dev/null && echo 1)
GRPC_TEST_DEFS := -DTFRDV_GRPC_TEST_SCRIPT='"$(abspath tests/grpc/peer.py)"' -DTFRDV_GRPC_TEST_PYTHON='"$(PEER_PY)"'
GRPC_TEST_DEPS :=
ifeq ($(PEER_OK),1)
GRPC_TEST_DEFS += -DTFRDV_GRPC_TEST_PEER=1 -DTFRDV_GRPC_TEST_PB='"$(abspath $(B)/grpc_py)"'
GRPC_TEST_DEPS += $(B)/grpc_py/worker_subset_pb2.py
endif
ifeq ($(CERTS_OK),1)
GRPC_TEST_DEFS += -DTFRDV_GRPC_TEST_CERTS='"$(abspath $(B)/grpc_certs)"'
GRPC_TEST_DEPS += $(B)/grpc_certs/ca.crt
endif

all: $(B)/test_grpc

$(B)/test_grpc: tests/grpc/test_grpc.c tests/grpc/rawgrpc.h $(HEADERS) $(GRPC_TEST_DEPS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) $(GRPC_CFLAGS) $(GRPC_TEST_DEFS) -o $@ $< $(GRPC_LIBS)

# per-peer routing: one manager served over gRPC and TCP at once (in process, needs no peer)
all: $(B)/test_multi

$(B)/test_multi: tests/grpc/test_multi.c tests/grpc/countwait.h $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) $(GRPC_CFLAGS) -o $@ $< $(GRPC_LIBS)

# the live transport attacked: a hostile raw C-core server, callbacks that tear down, cancels and
# microsecond deadlines racing answers, floods, a server killed with SIGKILL (also in make asan/tsan)
all: $(B)/test_grpc_adversary

$(B)/test_grpc_adversary: tests/grpc/test_grpc_adversary.c tests/grpc/rawgrpc.h tests/grpc/countwait.h $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) $(GRPC_CFLAGS) -o $@ $< $(GRPC_LIBS)

# the transport conformance suite (tests/conformance.h) against tfrdv_grpc.h, in one process
all: $(B)/test_grpc_conformance

$(B)/test_grpc_conformance: tests/grpc/test_grpc_conformance.c $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) $(GRPC_CFLAGS) -o $@ $< $(GRPC_LIBS)

$(B)/ex_grpc_workers: examples/grpc_workers.c $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(STD) $(OPT) -Wall -Wextra -Werror $(SAN) -I. $(GRPC_CFLAGS) -o $@ $< $(GRPC_LIBS)

$(B)/grpc_py/worker_subset_pb2.py: tests/grpc/worker_subset.proto
	@mkdir -p $(B)/grpc_py
	$(SAY) PROTOC $@
	$(Q)protoc --python_out=$(B)/grpc_py -Itests/grpc $<

$(B)/grpc_certs/ca.crt: tests/grpc/certs.sh
	$(SAY) CERTS $(B)/grpc_certs
	$(Q)bash tests/grpc/certs.sh $(B)/grpc_certs

# The sanitizer runs of the two-process test (the same binary; libgrpc itself is not instrumented:
# test_grpc.c carries TSan/LSan suppressions for reports inside libgrpc, absl, openssl only).
grpc-asan:
	$(NEED_CLANG)
	@$(MAKE) --no-print-directory build/grpc-asan/test_grpc B=build/grpc-asan CC=clang OPT="-O1 -g -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
	@echo "== test_grpc (ASan+UBSan)"
	@ASAN_OPTIONS=detect_leaks=1 build/grpc-asan/test_grpc
grpc-tsan:
	$(NEED_CLANG)
	@$(MAKE) --no-print-directory build/grpc-tsan/test_grpc B=build/grpc-tsan CC=clang OPT="-O1 -g" SAN="-fsanitize=thread"
	@echo "== test_grpc (TSan)"
	@TSAN_OPTIONS=halt_on_error=1 build/grpc-tsan/test_grpc

bench-grpc: $(if $(filter 1,$(CERTS_OK)),build/bench/grpc_certs/ca.crt)
	@mkdir -p build/bench
	$(SAY) CC build/bench/bench_grpc
	$(Q)$(CC) -std=c99 -O2 -DNDEBUG -I. -Wall -Wextra $(GRPC_CFLAGS) -o build/bench/bench_grpc bench/bench_grpc.c $(GRPC_LIBS)
	@TFRDV_BENCH_CERTS=$(if $(filter 1,$(CERTS_OK)),build/bench/grpc_certs) ./build/bench/bench_grpc
build/bench/grpc_certs/ca.crt: tests/grpc/certs.sh
	@bash tests/grpc/certs.sh build/bench/grpc_certs

demo-grpc: $(B)/ex_grpc_workers
	@$(B)/ex_grpc_workers
else
# no gRPC C core: nothing here is built; the example's pattern rule is replaced by this note
$(B)/ex_grpc_workers:
	@true
test: grpc-skip
grpc-skip:
	@echo "[SKIP] test_grpc, test_multi, test_grpc_adversary, test_grpc_conformance, grpc_workers (tfrdv_grpc.h): gRPC C core not found by pkg-config; apt-get install $(GRPC_PKGS)"
grpc-asan grpc-tsan bench-grpc demo-grpc:
	@echo "make $@ needs the gRPC C core: apt-get install $(GRPC_PKGS)"; exit 1
endif
