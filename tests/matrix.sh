#!/usr/bin/env bash
# The build matrix (portability contracts of tfrdv.h). Prints one line per cell:
#   [ OK ] name  |  [FAIL] name (+ the compiler output, indented)  |  [SKIP] name (needs PACKAGES)
# A cell whose compiler is not installed is skipped, naming the Debian packages that provide it.
# V=1 prints each cell's command. Works in a temp dir; always exits 0 (tests/run.sh counts the lines).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 0

CWARN="-Wall -Wextra -Wpedantic -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes"
CWARN="$CWARN -Wdeclaration-after-statement -Wconversion -Wsign-conversion"
CXXWARN="-Wall -Wextra -Wpedantic -Werror -fno-exceptions -fno-rtti"
INC="-I$root -I$root/tests"

printf '#include "tfrdv.h"\n' > decl.c
printf '#define TFRDV_IMPLEMENTATION\n#include "tfrdv.h"\n' > impl.c

have() { command -v "$1" > /dev/null 2>&1; }
# cell NAME CMD...: runs the command (a shell string), OK or FAIL with its output indented
cell() {
  local name=$1; shift
  [ "${V:-0}" = 1 ] && echo "      \$ $*"
  if out=$(eval "$*" 2>&1); then echo "[ OK ] $name"
  else echo "[FAIL] $name"; printf '%s\n' "$out" | head -30 | sed 's/^/      /'; fi
}
# skip NAME TOOL: the packages (apt-get install --no-install-recommends ...) that provide TOOL
skip() {
  local pkgs
  case $2 in
    clang|clang++) pkgs="clang libclang-rt-14-dev";;
    arm-none-eabi-gcc) pkgs="gcc-arm-none-eabi libnewlib-arm-none-eabi";;
    x86_64-w64-mingw32-gcc) pkgs="gcc-mingw-w64-x86-64";;
    grpc) pkgs="libgrpc-dev pkg-config";;
    ibverbs) pkgs="libibverbs-dev";;
    *) pkgs="build-essential";;
  esac
  echo "[SKIP] $1 (needs $pkgs)"
}

# 1. C: declarations-only and implementation TUs, {gcc, clang} x {c99, c11}, full warnings
for cc in gcc clang; do
  for std in c99 c11; do
    if ! have $cc; then skip "$cc -std=$std decl+impl" $cc; continue; fi
    cell "$cc -std=$std declarations" $cc -std=$std $CWARN $INC -c decl.c -o decl_${cc}_$std.o
    cell "$cc -std=$std implementation" $cc -std=$std $CWARN $INC -c impl.c -o impl_${cc}_$std.o
  done
done

# 1b. the companions' implementations keep the same C90-style blocks (declarations first)
if have gcc; then
  for h in tcp grpc verbs; do
    H=$(echo "$h" | tr a-z A-Z); extra=""
    if [ $h = grpc ]; then pkg-config --exists grpc 2> /dev/null || { skip "gcc -std=c99 tfrdv_grpc.h implementation" grpc; continue; }
      extra=$(pkg-config --cflags grpc); fi
    if [ $h = verbs ] && [ ! -f /usr/include/infiniband/verbs.h ]; then skip "gcc -std=c99 tfrdv_verbs.h implementation" ibverbs; continue; fi
    printf '#define _GNU_SOURCE\n#define TFRDV_IMPLEMENTATION\n#define TFRDV_%s_IMPLEMENTATION\n#include "tfrdv.h"\n#include "tfrdv_%s.h"\n' "$H" "$h" > comp_$h.c
    cell "gcc -std=c99 tfrdv_$h.h implementation (-Wdeclaration-after-statement)" \
      gcc -std=c99 -Wall -Wextra -Werror -Wdeclaration-after-statement $extra $INC -c comp_$h.c -o comp_$h.o
  done
fi

# 2. C++: implementation + runtime smoke use, {g++, clang++} x {c++11, c++17}
for cxx in g++ clang++; do
  for std in c++11 c++17; do
    if ! have $cxx; then skip "$cxx -std=$std compile_cpp" $cxx; continue; fi
    cell "$cxx -std=$std compile_cpp (build + run)" \
      "$cxx -std=$std $CXXWARN $INC -o cpp_$std $root/tests/compile_cpp.cpp -lpthread && ./cpp_$std"
  done
done

# 3. linking: implementation in exactly one of two TUs; TFRDV_STATIC in two TUs
for cc in gcc clang; do
  if ! have $cc; then skip "$cc link/static" $cc; continue; fi
  cell "$cc two TUs, implementation in one (link + run)" \
    "$cc -std=c99 $CWARN $INC -o link_$cc $root/tests/link_a.c $root/tests/link_b.c -lpthread && ./link_$cc"
  cell "$cc TFRDV_STATIC in two TUs (link + run)" \
    "$cc -std=c99 $CWARN $INC -o static_$cc $root/tests/static_a.c $root/tests/static_b.c -lpthread && ./static_$cc"
done

# 4. option builds, warning-free
for cc in gcc clang; do
  if ! have $cc; then skip "$cc options" $cc; continue; fi
  cell "$cc -DTFRDV_NO_THREADS" $cc -std=c99 $CWARN $INC -DTFRDV_NO_THREADS -c impl.c -o nt_$cc.o
  cell "$cc -DTFRDV_NO_MALLOC -DTFRDV_NO_CLOCK" \
    $cc -std=c99 $CWARN $INC -DTFRDV_NO_MALLOC -DTFRDV_NO_CLOCK -c impl.c -o nm_$cc.o
  cell "$cc -DTFRDV_THREADS_CUSTOM" $cc -std=c99 $CWARN $INC -DTFRDV_THREADS_CUSTOM -c impl.c -o tc_$cc.o
  cell "$cc -DTFRDV_NO_FUTEX (pthread mutexes)" $cc -std=c99 $CWARN $INC -DTFRDV_NO_FUTEX -c impl.c -o nf_$cc.o
  cell "$cc -DTFRDV_NO_MEMBARRIER (exchange unlock)" $cc -std=c99 $CWARN $INC -DTFRDV_NO_MEMBARRIER -c impl.c -o nm_$cc.o
  cell "$cc -DTFRDV_STATUS_MSG_MAX=16" $cc -std=c99 $CWARN $INC -DTFRDV_STATUS_MSG_MAX=16 -c impl.c -o m16_$cc.o
done

# 5. freestanding embedded target (compile only)
if have arm-none-eabi-gcc; then
  cell "arm-none-eabi-gcc cortex-m4 freestanding" \
    arm-none-eabi-gcc -std=c99 -ffreestanding -mcpu=cortex-m4 -mthumb -Os -Wall -Wextra -Werror \
      -DTFRDV_NO_THREADS -DTFRDV_NO_MALLOC -DTFRDV_NO_CLOCK $INC -c impl.c -o arm.o
else
  skip "arm-none-eabi-gcc cortex-m4 freestanding" arm-none-eabi-gcc
fi

# 6. hygiene: no private macro after the implementation, no private or foreign external symbol
# Win32 primitives (SRWLOCK, CONDITION_VARIABLE, Interlocked*): compile-checked with MinGW
if have x86_64-w64-mingw32-gcc; then
  cell "x86_64-w64-mingw32-gcc -std=c99 implementation (Win32 threads)" \
    x86_64-w64-mingw32-gcc -std=c99 $CWARN $INC -c impl.c -o impl_win32.o
else
  skip "x86_64-w64-mingw32-gcc implementation (Win32 threads)" x86_64-w64-mingw32-gcc
fi

macros() {
  gcc -std=c99 $INC -dM -E impl.c > macros.txt || return 1
  local leaked
  leaked=$(grep -o '^#define TFRDV__[A-Za-z0-9_]*' macros.txt | grep -v '^#define TFRDV__IMPLEMENTATION_DONE$')
  [ -z "$leaked" ] || { echo "private macros still defined after the implementation:"; echo "$leaked"; return 1; }
}
symbols() {
  gcc -std=c99 $INC -c impl.c -o hyg.o || return 1
  local bad
  bad=$(nm -g --defined-only hyg.o | awk 'NF >= 3 {print $3}' | grep -v '^tfrdv_' ; \
        nm -g --defined-only hyg.o | awk 'NF >= 3 {print $3}' | grep '^tfrdv__')
  [ -z "$bad" ] || { echo "unexpected external symbols:"; echo "$bad"; return 1; }
  nm -g --defined-only hyg.o | grep -q ' T tfrdv_key_parse$' || { echo "tfrdv_key_parse not exported"; return 1; }
}
cell "hygiene: no TFRDV__ macro leaks" macros
cell "hygiene: external symbols are tfrdv_* only" symbols

# 7. copy-paste code: every example and the README example compile as C99 and as C++11, warning-free
#    (examples of the companion headers: 7b)
awk '/readme-example/{f=1;next} f&&/^```c/{g=1;next} g&&/^```/{exit} g{print}' "$root/README.md" > readme_example.c
for src in "$root"/examples/*.c readme_example.c; do
  grep -q 'tfrdv_grpc\.h\|tfrdv_verbs\.h' "$src" && continue
  name=$(basename "$src" .c)
  [ "$name" = readme_example ] && name="README example" || name="examples/$name.c"
  if have gcc; then cell "$name as C99" gcc -std=c99 -Wall -Wextra -Werror $INC -o ex_c "'$src'" -lpthread
  else skip "$name as C99" gcc; fi
  if have g++; then cell "$name as C++11" g++ -x c++ -std=c++11 -Wall -Wextra -Werror $INC -o ex_cxx "'$src'" -lpthread
  else skip "$name as C++11" g++; fi
done
# 7b. the companion headers' examples, with their libraries
for src in "$root"/examples/grpc_workers.c "$root"/examples/tf_peer/tf_peer.c "$root"/examples/verbs_workers.c; do
  name=${src#"$root"/}
  case $name in
    *verbs*) lib=ibverbs; flags="-lpthread -ldl"; ok=$( [ -e /usr/include/infiniband/verbs.h ] && echo 1 ) ;;
    *) lib=grpc; flags="\$(pkg-config --cflags --libs grpc) -lpthread"; ok=$(pkg-config --exists grpc 2> /dev/null && echo 1) ;;
  esac
  if [ "$ok" = 1 ]; then
    cell "$name as C99" gcc -std=c99 -Wall -Wextra -Werror $INC -o ex_c "'$src'" "$flags"
    cell "$name as C++11" g++ -x c++ -std=c++11 -Wall -Wextra -Werror $INC -o ex_cxx "'$src'" "$flags"
  else
    skip "$name as C99 and C++11" $lib
  fi
done
exit 0
