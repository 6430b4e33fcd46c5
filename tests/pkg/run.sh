#!/usr/bin/env bash
# tests/pkg/run.sh - builds and runs tests/pkg/consumer.c through each package users pick up tfrdv
# with: `make install` + pkg-config, CMake find_package (that prefix), CMake add_subdirectory,
# CMake FetchContent (SOURCE_DIR: no network), meson subproject. One line per way:
# "[ OK ] pkg: <way>", "[FAIL] pkg: <way>: <reason>" (then the log's tail) or
# "[SKIP] pkg: <way> (needs <Debian packages>)" when a tool is missing. Everything is built under
# build/pkg (PKG_BUILD). CMAKE, MESON, PKG_CONFIG pick the tools (default: from PATH).
# Run by `make pkg-test` and, through tests/run.sh, by `make test`. Exit status 1 on a failure.
set -u
cd "$(dirname "$0")/../.."
repo=$(pwd)
W=${PKG_BUILD:-$repo/build/pkg}
CC=${CC:-cc}
CMAKE=${CMAKE:-cmake}
MESON=${MESON:-meson}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
export CC
failed=0
ver=$(sed -n 's/^#define TFRDV_VERSION_STRING "\(.*\)"$/\1/p' tfrdv.h)
rm -rf "$W"; mkdir -p "$W"

ok()   { printf '[ OK ] pkg: %s\n' "$1"; }
bad()  { failed=1; printf '[FAIL] pkg: %s: %s\n' "$1" "$2"; [ -f "${3:-}" ] && tail -n 20 "$3" | sed 's/^/  /'; }
skip() { printf '[SKIP] pkg: %s (needs %s)\n' "$1" "$2"; }
have() { command -v "$1" > /dev/null 2>&1; }
# run the consumer a way built; it prints this line only when its send + recv and tcp worked
check_run() { # way binary log
  if "$2" >> "$3" 2>&1 && grep -qx "consumer OK 42.0 (tfrdv $ver)" "$3"; then ok "$1"
  else bad "$1" "the consumer failed" "$3"; fi
}

# 0. meson.build cannot compute its version: it must say what tfrdv.h says (meson checks it
#    too when configuring; this line holds without meson)
mv=$(sed -n "s/^project('tfrdv', 'c', version: '\([^']*\)'.*/\1/p" meson.build)
if [ -n "$ver" ] && [ "$mv" = "$ver" ]; then ok "meson.build version $mv is tfrdv.h's"
else bad "meson.build version" "meson.build says '${mv}', tfrdv.h '${ver}'"; fi

# The ways that need no install start first, in the background (each in its own build
# directory, its line into $W/r<N>); the lines are printed in order at the end.
# 3-4. CMake: one consumer project (tests/pkg/cmake), configured once per way (2 is below)
cmake_way() { # way TFRDV_WAY [cmake args]
  local name=$1 how=$2 b=$W/cmake-$2 log=$W/cmake-$2.log; shift 2
  if "$CMAKE" --no-warn-unused-cli -S tests/pkg/cmake -B "$b" -DTFRDV_WAY="$how" -DTFRDV_SOURCE="$repo" -DTFRDV_WANT="$ver" "$@" > "$log" 2>&1 \
     && "$CMAKE" --build "$b" >> "$log" 2>&1; then check_run "$name" "$b/consumer" "$log"
  else bad "$name" "cmake configure or build failed" "$log"; fi
}
cv=""
if ! have "$CMAKE"; then skip "cmake add_subdirectory" "cmake" > "$W/r3"; skip "cmake FetchContent" "cmake" > "$W/r4"
else
  cv=$("$CMAKE" --version | sed -n '1s/.* //p')
  cmake_way "cmake $cv add_subdirectory" subdirectory > "$W/r3" &
  cmake_way "cmake $cv FetchContent" fetchcontent > "$W/r4" &
fi

# 5. meson: a project with the repository as subprojects/tfrdv and a wrap that provides it
if ! have "$MESON"; then skip "meson subproject" "meson ninja-build" > "$W/r5"
elif ! have ninja; then skip "meson subproject" "ninja-build" > "$W/r5"
else
  mesv=$("$MESON" --version); src=$W/meson-src; log=$W/meson.log
  mkdir -p "$src/subprojects"
  cp tests/pkg/meson/meson.build tests/pkg/consumer.c "$src/"
  ln -s "$repo" "$src/subprojects/tfrdv"
  printf '[wrap-git]\ndirectory = tfrdv\nurl = %s\nrevision = HEAD\n\n[provide]\ndependency_names = tfrdv\n' "$repo" > "$src/subprojects/tfrdv.wrap"
  { if "$MESON" setup --force-fallback-for=tfrdv "$W/meson-build" "$src" > "$log" 2>&1 && "$MESON" compile -C "$W/meson-build" >> "$log" 2>&1; then
      check_run "meson $mesv subproject (wrap, dependency('tfrdv'))" "$W/meson-build/consumer" "$log"
    else bad "meson $mesv subproject (wrap, dependency('tfrdv'))" "meson setup or compile failed" "$log"; fi; } > "$W/r5" &
fi

# 1. make install PREFIX (and DESTDIR), then pkg-config
prefix=$W/prefix
MAKEFLAGS= MFLAGS= make --no-print-directory install PREFIX=/opt/tfrdv DESTDIR="$W/stage" > "$W/install-destdir.log" 2>&1 & destdir=$!
if ! MAKEFLAGS= MFLAGS= make --no-print-directory install PREFIX="$prefix" > "$W/install.log" 2>&1; then
  bad "make install" "make install PREFIX=$prefix failed" "$W/install.log"; prefix=""
else
  miss=""
  for f in include/tfrdv.h include/tfrdv_tcp.h include/tfrdv_grpc.h include/tfrdv_verbs.h \
           share/pkgconfig/tfrdv.pc share/cmake/tfrdv/tfrdv-config.cmake share/cmake/tfrdv/tfrdv-config-version.cmake; do
    [ -f "$prefix/$f" ] || miss="$miss $f"
  done
  for h in tfrdv.h tfrdv_tcp.h tfrdv_grpc.h tfrdv_verbs.h; do cmp -s "$h" "$prefix/include/$h" || miss="$miss $h(differs)"; done
  if wait "$destdir" && cat "$W/install-destdir.log" >> "$W/install.log" \
     && [ -f "$W/stage/opt/tfrdv/include/tfrdv.h" ] && grep -qx 'prefix=/opt/tfrdv' "$W/stage/opt/tfrdv/share/pkgconfig/tfrdv.pc"; then :
  else miss="$miss DESTDIR=$W/stage"; fi
  if [ -z "$miss" ]; then ok "make install PREFIX, DESTDIR"; else bad "make install" "missing or wrong:$miss" "$W/install.log"; fi
fi
if ! have "$PKG_CONFIG"; then skip "pkg-config" "pkg-config"
elif [ -z "$prefix" ]; then bad "pkg-config" "nothing installed"
else
  log=$W/pkgconfig.log; : > "$log"
  export PKG_CONFIG_PATH="$prefix/share/pkgconfig"
  mod=$("$PKG_CONFIG" --modversion tfrdv 2>> "$log")
  cflags=$(echo $("$PKG_CONFIG" --cflags tfrdv 2>> "$log")); libs=$("$PKG_CONFIG" --libs tfrdv 2>> "$log")
  unset PKG_CONFIG_PATH
  if [ "$mod" != "$ver" ]; then bad "pkg-config" "--modversion tfrdv says '$mod', tfrdv.h '$ver'" "$log"
  elif [ "$cflags" != "-I$prefix/include" ]; then bad "pkg-config" "--cflags tfrdv says '$cflags'" "$log"
  # shellcheck disable=SC2086  # word splitting of the flags is the point
  elif ! (set -x; $CC -std=c99 -Wall -Wextra -Wpedantic -Werror $cflags -o "$W/consumer_pc" tests/pkg/consumer.c $libs) >> "$log" 2>&1; then
    bad "pkg-config" "the consumer did not build" "$log"
  else check_run "pkg-config: cc \$(pkg-config --cflags --libs tfrdv)" "$W/consumer_pc" "$log"; fi
fi

# 2. CMake find_package against the prefix (tests/pkg/cmake also checks the version file)
if [ -z "$cv" ]; then skip "cmake find_package" "cmake"
elif [ -z "$prefix" ]; then bad "cmake $cv find_package(tfrdv CONFIG)" "nothing installed"
else cmake_way "cmake $cv find_package(tfrdv CONFIG)" find_package -DCMAKE_PREFIX_PATH="$prefix"; fi

wait
for r in "$W"/r3 "$W"/r4 "$W"/r5; do cat "$r"; grep -q '^\[FAIL\]' "$r" && failed=1; done
exit "$failed"
