# tests/tcp/tcp.mk - the socket companion (tfrdv_tcp.h), included at the end of the Makefile.
#   make test        builds and runs $(B)/test_tcp (two processes; needs no package) and, in the
#                    default build, $(B)/test_tcp_poll (the same tests on the poll() loop)
#   make asan/tsan   build and run it too (every $(B)/test_* binary)
#   make fuzz-tcp    libFuzzer on the frame decoder (FUZZ_SECONDS, default 60; needs clang)
.PHONY: fuzz-tcp

all: $(B)/test_tcp

$(B)/test_tcp: tests/tcp/test_tcp.c tests/tcp/rawframe.h $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) -o $@ $< $(LDLIBS)

fuzz-tcp:
	@bash tests/tcp/fuzz.sh

# the same tests on the poll() loop (what non-Linux hosts run); not in the sanitizer builds
ifeq ($(SAN),)
all: $(B)/test_tcp_poll
endif
$(B)/test_tcp_poll: tests/tcp/test_tcp.c tests/tcp/rawframe.h $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) -DTFRDV_TCP_NO_EPOLL -o $@ $< $(LDLIBS)

# the transport conformance suite (tests/conformance.h) against tfrdv_tcp.h, in one process
all: $(B)/test_tcp_conformance
$(B)/test_tcp_conformance: tests/tcp/test_tcp_conformance.c $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) -o $@ $< $(LDLIBS)

# the same-host path (SAME HOST in tfrdv_tcp.h): values by address between two processes
all: $(B)/test_tcp_samehost
$(B)/test_tcp_samehost: tests/tcp/test_tcp_samehost.c tests/tcp/rawframe.h $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) -o $@ $< $(LDLIBS)

# hostile peers and racing give-ups against tfrdv_tcp.h (the TCP upgrade's side socket, floods)
all: $(B)/test_tcp_adversary
$(B)/test_tcp_adversary: tests/tcp/test_tcp_adversary.c tests/tcp/rawframe.h $(HEADERS)
	@mkdir -p $(B)
	$(SAY) CC $@
	$(Q)$(CC) $(CFLAGS_T) -o $@ $< $(LDLIBS)
