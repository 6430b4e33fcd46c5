# fuzzlib.sh - sourced by the libFuzzer scripts (tests/fuzz.sh, tests/tcp/fuzz.sh,
# tests/grpc/fuzz.sh), run from the project root: FUZZ_SECONDS (default 60) and CLANG (default
# clang) from the environment.
#   fuzz_build DIR NAME SOURCE [cc args...]
#                                        builds build/DIR/NAME with libFuzzer, ASan and UBSan;
#                                        sets $out=build/DIR and makes $out/corpus
#   seed FILE BYTES                      writes a seed input (printf escapes) into $out/corpus
#   fuzz_run NAME [libFuzzer args...]    runs it for FUZZ_SECONDS; a crash or a broken invariant
#                                        exits non-zero (reproducer in $out/)
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
CLANG=${CLANG:-clang}
fuzz_build() {
  local name=$2 src=$3
  out=build/$1
  shift 3
  mkdir -p "$out/corpus"
  "$CLANG" -std=c99 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -I. -o "$out/$name" "$src" "$@"
}
seed() { printf "$2" > "$out/corpus/$1"; }
fuzz_run() {
  local name=$1
  shift
  echo "$name: ${FUZZ_SECONDS}s"
  "$out/$name" -max_total_time="$FUZZ_SECONDS" -max_len=4096 -artifact_prefix="$out/" \
    -print_final_stats=1 "$@" "$out/corpus"
}
