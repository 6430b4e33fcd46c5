# tfrdv - build, test, sanitize, bench. `make test` ends with "N passed, N failed".
CC       ?= cc
CXX      ?= c++
OPT      ?= -O1 -g
WARN     := -Wall -Wextra -Wpedantic -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wconversion -Wsign-conversion
STD      ?= -std=c99
SAN      ?=
B        ?= build/default
LDLIBS   := -lpthread
CFLAGS_T  = $(STD) $(OPT) $(WARN) $(SAN) -I. -Itests
# the test files include tt.h's helpers; -Wmissing-prototypes is off for them (static tests)
# `make V=1 ...` shows the full compiler command lines; by default one short line per binary
V        ?= 0
Q         = $(if $(filter 1,$(V)),,@)
SAY       = $(if $(filter 1,$(V)),@true,@printf '  %-5s %s\n')
TEST_SRCS    := $(wildcard tests/test_*.c)
EXAMPLE_SRCS := $(wildcard examples/*.c)
TESTS    := $(patsubst tests/%.c,$(B)/%,$(TEST_SRCS)) $(B)/test_locks_fenced
EXAMPLES := $(patsubst examples/%.c,$(B)/ex_%,$(EXAMPLE_SRCS))
HEADERS  := tfrdv.h $(wildcard tfrdv_*.h) tests/tt.h $(wildcard tests/*.h)

.PHONY: all test asan tsan valgrind bench bench-tcp fuzz demo demo-tcp clean check examples help
all: $(TESTS) $(EXAMPLES)
examples: $(EXAMPLES)

help:
	@echo "make demo       the demo: a ps and a worker in one process (loopback transport)"
	@echo "make demo-tcp   the same as two processes over tfrdv_tcp.h"
	@echo "make test       every suite, example and build-matrix cell; last line 'N passed, N failed'"
	@echo "make check      the same as make test"
	@echo "make examples   build the examples into $(B)/ex_*"
	@echo "make asan/tsan  make test under ASan+UBSan / TSan (clang); make valgrind"
	@echo "make bench      the local-rendezvous benchmark (ratios to same-run baselines)"
	@echo "make fuzz       libFuzzer on the key, device-name and TF_CONFIG parsers (FUZZ_SECONDS)"
	@echo "companions: make bench-tcp (tfrdv_tcp.h vs raw sockets and gRPC),"
	@echo "  make bench-grpc demo-grpc grpc-asan grpc-tsan fuzz-grpc (tfrdv_grpc.h),"
	@echo "  make test-rxe bench-rxe fuzz-verbs (tfrdv_verbs.h), make interop demo-tf tf-oracle bench-tf"
	@echo "make install    headers, tfrdv.pc and the CMake package into PREFIX (/usr/local; DESTDIR too)"
	@echo "make pkg-test   a consumer built with pkg-config, CMake (3 ways) and meson (tests/pkg/run.sh)"
	@echo "V=1 shows compiler command lines; JOBS=N sets make test's build parallelism"

$(B)/test_%: tests/test_%.c $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) -o $@ $< $(LDLIBS)

# the conformance suite runs the example's transport too
$(B)/test_conformance: examples/custom_transport.c

# the lock suite again with the fallback unlock (an atomic exchange, no membarrier)
$(B)/test_locks_fenced: tests/test_locks.c $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) -DTFRDV_NO_MEMBARRIER -o $@ $< $(LDLIBS)

$(B)/ex_%: examples/%.c $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(STD) $(OPT) -Wall -Wextra -Werror $(SAN) -I. -o $@ $< $(LDLIBS)

# the README's test command: every suite, every example, the build matrix
RUN_MATRIX ?= 1
TFRDV_STRESS_OPS ?= 1000000
JOBS ?= $(shell nproc 2> /dev/null || echo 2)
# build in parallel unless the caller already chose (make -jN test)
PAR = $(if $(findstring j,$(firstword -$(MAKEFLAGS))),,-j$(JOBS))
test:
	@$(MAKE) --no-print-directory $(PAR) all
	@B=$(B) CC=$(CC) CXX=$(CXX) SAN="$(SAN)" V=$(V) RUN_MATRIX=$(RUN_MATRIX) TFRDV_STRESS_OPS=$(TFRDV_STRESS_OPS) bash tests/run.sh

NEED_CLANG = @command -v clang > /dev/null || { echo "make $@ needs clang: sudo apt-get install -y --no-install-recommends clang libclang-rt-14-dev"; exit 1; }
asan:
	$(NEED_CLANG)
	@$(MAKE) --no-print-directory test B=build/asan CC=clang CXX=clang++ OPT="-O1 -g -fno-omit-frame-pointer" SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" RUN_MATRIX=0
tsan:
	$(NEED_CLANG)
	@$(MAKE) --no-print-directory test B=build/tsan CC=clang CXX=clang++ OPT="-O1 -g" SAN="-fsanitize=thread" RUN_MATRIX=0 TFRDV_STRESS_OPS=300000
check: test
valgrind:
	@$(MAKE) --no-print-directory $(PAR) all
	@B=$(B) VALGRIND=1 RUN_MATRIX=0 TFRDV_STRESS_OPS=100000 bash tests/run.sh

# a ps and a worker in one process (the loopback transport), and as two processes over
# tfrdv_tcp.h; `ex_two_workers --trace out.json` writes a timeline for ui.perfetto.dev
demo: $(B)/ex_two_workers
	@$(B)/ex_two_workers
demo-tcp: $(B)/ex_tcp_workers
	@$(B)/ex_tcp_workers

fuzz:
	@bash tests/fuzz.sh

bench:
	@mkdir -p build/bench
	$(SAY) CC build/bench/bench
	$(Q)$(CC) -std=c99 -O2 -DNDEBUG -I. -Wall -Wextra -o build/bench/bench bench/bench.c $(LDLIBS)
	@./build/bench/bench

# tfrdv_tcp.h against raw sockets on TCP and Unix sockets, and against tfrdv_grpc.h when
# pkg-config finds the gRPC C core (otherwise the gRPC rows are skipped, with a note)
bench-tcp:
	@mkdir -p build/bench
	$(SAY) CC build/bench/bench_tcp
	$(Q)if pkg-config --exists grpc 2> /dev/null; then g="-DTFRDV_BENCH_GRPC $$(pkg-config --cflags grpc)"; \
	  l="$$(pkg-config --libs grpc)"; fi; \
	  $(CC) -std=c99 -O2 -DNDEBUG -I. -Wall -Wextra $$g -o build/bench/bench_tcp bench/bench_tcp.c $$l $(LDLIBS)
	@./build/bench/bench_tcp
	$(Q)$(CC) -std=c99 -O2 -DNDEBUG -I. -Wall -Wextra -o build/bench/bench_samehost bench/bench_samehost.c $(LDLIBS)
	@./build/bench/bench_samehost

clean:
	rm -rf build

# Header-only, so everything is architecture-independent: tfrdv.pc goes to share/pkgconfig and
# the CMake package to share/cmake/tfrdv (both searched by default under a prefix). The version
# comes from tfrdv.h. tests/pkg/run.sh installs into build/pkg and builds a consumer against it.
.PHONY: install pkg-test
PREFIX  ?= /usr/local
PKG_VERSION := $(shell sed -n 's/^\#define TFRDV_VERSION_STRING "\(.*\)"$$/\1/p' tfrdv.h)
install:
	@case "$(PREFIX)" in /*) ;; *) echo "make install: PREFIX must be an absolute path, not '$(PREFIX)'"; exit 1;; esac
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/pkgconfig $(DESTDIR)$(PREFIX)/share/cmake/tfrdv
	install -m 644 tfrdv.h $(wildcard tfrdv_*.h) $(DESTDIR)$(PREFIX)/include
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(PKG_VERSION)|' pkg/tfrdv.pc.in > $(DESTDIR)$(PREFIX)/share/pkgconfig/tfrdv.pc
	install -m 644 pkg/tfrdv-config.cmake $(DESTDIR)$(PREFIX)/share/cmake/tfrdv
	sed -e 's|@VERSION@|$(PKG_VERSION)|' pkg/tfrdv-config-version.cmake.in > $(DESTDIR)$(PREFIX)/share/cmake/tfrdv/tfrdv-config-version.cmake
pkg-test:
	@CC=$(CC) bash tests/pkg/run.sh
-include tests/grpc/grpc.mk
-include tests/tf/tf.mk
-include tests/verbs/verbs.mk
-include tests/interop/interop.mk
-include tests/tcp/tcp.mk
