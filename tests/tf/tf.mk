# tests/tf/tf.mk - TensorFlow as the oracle and the benchmark peer. Included by the Makefile
# (`-include tests/tf/tf.mk`); nothing in `make test` depends on it.
#   make tf-oracle   differential test of keys and device names against TensorFlow's own code
#   make bench-tf    tfrdv and TensorFlow's LocalRendezvous / key code timed side by side
# Both run tests/tf/setup.sh first: a venv with tensorflow-cpu (TF_VENV, default build/tf-venv;
# reused when present) whose compile and link flags it writes to $(TF_OUT)/cflags and ldflags.
# ORACLE_ARGS / BENCH_TF_ARGS pass options through (e.g. ORACLE_ARGS="--seed 7 --scale 3").
TF_VENV       ?= build/tf-venv
TF_OUT        ?= build/tf
TF_CXX        ?= g++
ORACLE_ARGS   ?=
BENCH_TF_ARGS ?=
# TensorFlow's headers come in as system headers (-isystem) so -Wall -Wextra judge only our code.
TF_CFLAGS = $$(sed 's/-I\([^ ]*\)/-isystem \1/g' $(TF_OUT)/cflags) -DTF_WHEEL_VERSION=\"$$(cat $(TF_OUT)/version)\"
TF_LIBS   = $$(cat $(TF_OUT)/ldflags) -lpthread
TF_ORACLE_SRCS := tests/tf/oracle.cpp tests/tf/c_literals.h tests/tf/gen.h tfrdv.h

.PHONY: tf-setup tf-oracle bench-tf

tf-setup:
	@TF_VENV=$(TF_VENV) TF_OUT=$(TF_OUT) bash tests/tf/setup.sh

$(TF_OUT)/oracle: $(TF_ORACLE_SRCS) $(TF_OUT)/cflags
	$(TF_CXX) $(TF_CFLAGS) -O2 -g -Wall -Wextra -I. -Itests/tf -o $@ tests/tf/oracle.cpp $(TF_LIBS)

$(TF_OUT)/bench_tf: bench/bench_tf.cpp tfrdv.h $(TF_OUT)/cflags
	$(TF_CXX) $(TF_CFLAGS) -O2 -DNDEBUG -Wall -Wextra -I. -o $@ bench/bench_tf.cpp $(TF_LIBS)

tf-oracle: tf-setup
	@$(MAKE) --no-print-directory $(TF_OUT)/oracle
	$(abspath $(TF_OUT))/oracle $(ORACLE_ARGS)

bench-tf: tf-setup
	@$(MAKE) --no-print-directory $(TF_OUT)/bench_tf
	$(abspath $(TF_OUT))/bench_tf $(BENCH_TF_ARGS)
