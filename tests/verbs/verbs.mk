# tests/verbs/verbs.mk - tfrdv_verbs.h: device-free unit test (part of `make test`), the fuzz
# target, and the Soft-RoCE runs in a QEMU guest (`make test-rxe`, `make bench-rxe`).
# Included from the Makefile (-include tests/verbs/verbs.mk). Also: make test-rxe-asan (the
# Soft-RoCE suite under ASan+UBSan), make fuzz-verbs (FUZZ_SECONDS, default 30).
VERBS_HAVE_IBV := $(shell test -f /usr/include/infiniband/verbs.h && echo 1)
VERBS_CFLAGS   := $(if $(VERBS_HAVE_IBV),-DTT_HAVE_IBV)
VERBS_LIBS     := -lpthread -ldl
RXE_DIR        ?= build/rxe

.PHONY: test-rxe test-rxe-asan bench-rxe fuzz-verbs verbs-deps
all: $(B)/test_verbs

# device-free: codec, credits, caches; with libibverbs-dev also the whole implementation
# (with libibverbs-dev it loads the stand-in libibverbs built beside it)
$(B)/test_verbs: tests/verbs/test_verbs.c tests/verbs/verbs_test.h tests/verbs/standin_test.h tfrdv.h tfrdv_verbs.h tests/tt.h $(if $(VERBS_HAVE_IBV),$(B)/libstandinverbs.so)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) $(VERBS_CFLAGS) -o $@ $< $(VERBS_LIBS)
# the transport conformance suite (tests/conformance.h) on the stand-in libibverbs; without
# libibverbs-dev it prints one [SKIP] line
all: $(B)/test_verbs_conformance
$(B)/test_verbs_conformance: tests/verbs/test_verbs_conformance.c tfrdv.h tfrdv_verbs.h tests/tt.h tests/conformance.h $(if $(VERBS_HAVE_IBV),$(B)/libstandinverbs.so)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) $(VERBS_CFLAGS) -o $@ $< $(VERBS_LIBS)
# the adversarial round (hostile bootstrap peers, cancels and aborts racing answers, timer floods)
all: $(B)/test_verbs_adversary
$(B)/test_verbs_adversary: tests/verbs/test_verbs_adversary.c tests/verbs/verbs_test.h tests/verbs/standin_test.h tfrdv.h tfrdv_verbs.h tests/tt.h $(if $(VERBS_HAVE_IBV),$(B)/libstandinverbs.so)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) $(VERBS_CFLAGS) -o $@ $< $(VERBS_LIBS)
$(B)/libstandinverbs.so: tests/verbs/standinverbs.c
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) -shared -fPIC $(STD) $(OPT) -Wall -Wextra -Werror $(SAN) -o $@ $< -lpthread

# libFuzzer target for the control-message and handshake decoders (clang)
FUZZ_SECONDS ?= 30
fuzz-verbs:
	@mkdir -p build/fuzz
	clang -std=c99 -g -O1 -fsanitize=fuzzer,address,undefined -I. -Itests -o build/fuzz/fuzz_verbs tests/verbs/fuzz_verbs.c
	@mkdir -p build/fuzz/verbs_corpus
	./build/fuzz/fuzz_verbs -max_total_time=$(FUZZ_SECONDS) -max_len=4096 build/fuzz/verbs_corpus

# the guest needs libibverbs-dev to build; rxe_vm.sh installs the rest
verbs-deps:
	@test -f /usr/include/infiniband/verbs.h || { [ "$$(id -u)" = 0 ] && (apt-get update -qq >/dev/null; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libibverbs-dev >/dev/null); }

$(RXE_DIR)/rxe_test: tests/verbs/rxe_test.c tests/verbs/verbs_test.h tfrdv.h tfrdv_verbs.h tests/tt.h | verbs-deps
	@mkdir -p $(RXE_DIR)
	$(CC) -std=c99 -O2 -g -Wall -Wextra -Werror -I. -Itests -o $@ $< $(VERBS_LIBS)
$(RXE_DIR)/libfaultverbs.so: tests/verbs/faultverbs.c | verbs-deps
	@mkdir -p $(RXE_DIR)
	$(CC) -shared -fPIC -O1 -Wall -Wextra -Werror -o $@ $< -ldl
$(RXE_DIR)/bench_verbs: tests/verbs/bench_verbs.c tfrdv.h tfrdv_verbs.h | verbs-deps
	@mkdir -p $(RXE_DIR)
	$(CC) -std=c99 -O2 -DNDEBUG -Wall -Wextra -Werror -I. -o $@ $< $(VERBS_LIBS)
$(RXE_DIR)/verbs_workers: examples/verbs_workers.c tfrdv.h tfrdv_verbs.h | verbs-deps
	@mkdir -p $(RXE_DIR)
	$(CC) -std=c99 -O2 -Wall -Wextra -Werror -I. -o $@ $< $(VERBS_LIBS)

# real libibverbs + real rdma_rxe in a QEMU guest; fails (never skips) when it cannot run
test-rxe: verbs-deps $(RXE_DIR)/rxe_test $(RXE_DIR)/verbs_workers $(RXE_DIR)/libfaultverbs.so
	@bash tests/verbs/rxe_vm.sh $(RXE_DIR)/vm tests/verbs/guest_test.sh $(RXE_DIR)/rxe_test $(RXE_DIR)/verbs_workers \
	  $(RXE_DIR)/libfaultverbs.so \
	  > $(RXE_DIR)/test-rxe.log 2>&1; rc=$$?; cat $(RXE_DIR)/test-rxe.log; \
	  grep -aE '^[0-9]+ passed, [0-9]+ failed$$' $(RXE_DIR)/test-rxe.log | tail -1 | grep -q ' 0 failed' && test $$rc = 0

bench-rxe: verbs-deps $(RXE_DIR)/bench_verbs
	@bash tests/verbs/rxe_vm.sh $(RXE_DIR)/vm tests/verbs/guest_bench.sh $(RXE_DIR)/bench_verbs > $(RXE_DIR)/bench-rxe.log 2>&1; \
	  rc=$$?; grep -a '^BENCH' $(RXE_DIR)/bench-rxe.log | sed 's/^BENCH //'; \
	  test $$rc = 0 || { tail -n 30 $(RXE_DIR)/bench-rxe.log; exit 1; }

# the same suite built with ASan+UBSan (clang), run in the guest (leaks, overflows, UB on real verbs)
test-rxe-asan: verbs-deps $(RXE_DIR)/verbs_workers $(RXE_DIR)/libfaultverbs.so
	@mkdir -p $(RXE_DIR)/asan
	clang -std=c99 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
	  -I. -Itests -o $(RXE_DIR)/asan/rxe_test tests/verbs/rxe_test.c $(VERBS_LIBS)
	@bash tests/verbs/rxe_vm.sh $(RXE_DIR)/vm tests/verbs/guest_test.sh $(RXE_DIR)/asan/rxe_test $(RXE_DIR)/verbs_workers \
	  $(RXE_DIR)/libfaultverbs.so > $(RXE_DIR)/test-rxe-asan.log 2>&1; rc=$$?; cat $(RXE_DIR)/test-rxe-asan.log; \
	  grep -aE '^[0-9]+ passed, [0-9]+ failed$$' $(RXE_DIR)/test-rxe-asan.log | tail -1 | grep -q ' 0 failed' && test $$rc = 0
