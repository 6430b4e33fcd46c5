#!/usr/bin/env bash
# Runs every test binary and example in $B, then the build matrix, and prints the total as the
# last line: "N passed, N failed" (", N skipped" when a test's environment or a matrix cell's
# compiler is missing: a [SKIP] line names it). Used by `make test`, `make asan`, `make tsan`,
# `make valgrind`. TFRDV_REQUIRE_ALL=1 (CI) counts every skipped matrix cell as a failure.
set -u
B=${B:-build/default}
CC=${CC:-cc}
CXX=${CXX:-c++}
RUN_MATRIX=${RUN_MATRIX:-1}
pass=0; fail=0; skipped=0; need=""
log=$(mktemp -d); trap 'rm -rf "$log"' EXIT
# sanitizer runs: reports from inside uninstrumented libraries (libgrpc) are suppressed, ours never
here=$(cd "$(dirname "$0")" && pwd)
export TSAN_OPTIONS="suppressions=$here/sanitizer.supp.tsan ${TSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$here/sanitizer.supp.lsan ${LSAN_OPTIONS:-}"
wrap=()
if [ "${VALGRIND:-0}" = 1 ]; then
  if ! command -v valgrind > /dev/null 2>&1; then
    echo "valgrind is not installed: sudo apt-get install -y --no-install-recommends valgrind"; exit 1
  fi
  wrap=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite)
fi

ok()   { pass=$((pass + 1)); printf '[ OK ] %s\n' "$1"; }
bad()  { fail=$((fail + 1)); printf '[FAIL] %s\n' "$1"; }

# 1. test binaries: add up their "N passed, N failed" lines
for t in "$B"/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  echo "== $name"
  "${wrap[@]}" "$t" > "$log/$name.out" 2>&1; rc=$?
  grep -v '^\[ OK \]' "$log/$name.out" | grep -Ev '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' | sed 's/^/  /' | head -60
  last=$(tail -n 1 "$log/$name.out")
  if [[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
    pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2])); skipped=$((skipped + ${BASH_REMATCH[4]:-0}))
    [ "$rc" -ne 0 ] && [ "${BASH_REMATCH[2]}" = 0 ] && bad "$name exited $rc"
    echo "   $last"
  else
    bad "$name crashed or printed no summary (exit $rc)"; tail -n 20 "$log/$name.out" | sed 's/^/  /'
  fi
done

# 2. examples: each must exit 0 (they check their own results)
for e in "$B"/ex_*; do
  [ -x "$e" ] || continue
  name=$(basename "$e")
  if "${wrap[@]}" "$e" > "$log/$name.out" 2>&1; then ok "example ${name#ex_}"
  else bad "example ${name#ex_} (exit $?)"; tail -n 20 "$log/$name.out" | sed 's/^/  /'; fi
done

# 3. the README's 20-line example must compile warning-free and run
awk '/readme-example/{f=1;next} f&&/^```c/{g=1;next} g&&/^```/{exit} g{print}' README.md > "$log/readme.c"
if $CC -std=c99 -Wall -Wextra -Werror ${SAN:-} -I. -o "$log/readme" "$log/readme.c" -lpthread > "$log/readme.out" 2>&1 \
   && "$log/readme" > "$log/readme.run" 2>&1 && grep -q '^OK: 42.0$' "$log/readme.run"; then ok "README example"
else bad "README example"; cat "$log/readme.out" "$log/readme.run" 2>/dev/null | head -20 | sed 's/^/  /'; fi

# 3b. the README's other code blocks (snippets): each compiles warning-free as a function body,
#     with every header's declarations and an on_recv callback in scope
{
  printf '#include "tfrdv.h"\n#include "tfrdv_tcp.h"\n#include "tfrdv_grpc.h"\n#include "tfrdv_verbs.h"\n#include <stdlib.h>\n#include <string.h>\n'
  printf 'static void on_recv(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra,\n'
  printf '                    tfrdv_value* v, int dead) { (void)u; (void)st; (void)sa; (void)ra; (void)dead; tfrdv_value_release(v); }\n'
  awk '/<!-- snippet/{f=1;next} f&&/^```c/{g=1;n++;printf "void snippet_%d(void);\nvoid snippet_%d(void) {\n", n, n;next} g&&/^```/{print "}";f=0;g=0;next} g{print}' README.md
} > "$log/snippets.c"
if ! grep -q '<!-- snippet' README.md; then :
elif grep -q '^void snippet_1' "$log/snippets.c" && $CC -std=c99 -Wall -Wextra -Werror -fsyntax-only -I. "$log/snippets.c" > "$log/snippets.out" 2>&1; then
  ok "README snippets ($(grep -c '^void snippet_[0-9]*(void) {' "$log/snippets.c"))"
else bad "README snippets"; head -20 "$log/snippets.out" | sed 's/^/  /'; fi

# 3c. every header's first line names the version its macros define, and CHANGELOG.md has a
#     section for the core's version (a release that forgot one of the three fails here)
vbad=""
for h in tfrdv.h tfrdv_tcp.h tfrdv_grpc.h tfrdv_verbs.h; do
  banner=$(head -n 1 "$h" | sed -n 's/^[/][*] [a-z_.]* - v\([0-9]*[.][0-9]*[.][0-9]*\) - .*/\1/p')
  str=$(sed -n 's/^#define TFRDV[A-Z_]*_VERSION_STRING "\(.*\)"$/\1/p' "$h")
  mm=$(sed -n 's/^#define TFRDV[A-Z_]*_VERSION_MAJOR \([0-9]*\)$/\1/p; s/^#define TFRDV[A-Z_]*_VERSION_MINOR \([0-9]*\)$/\1/p' "$h" | paste -sd.)
  [ -n "$banner" ] && [ "$banner" = "$str" ] && [ "${str%.*}" = "$mm" ] || vbad="$vbad $h (line 1: ${banner:-none}, macros: ${str:-none} / ${mm:-none})"
done
core=$(sed -n 's/^#define TFRDV_VERSION_STRING "\(.*\)"$/\1/p' tfrdv.h)
grep -q "^## $core\$" CHANGELOG.md || vbad="$vbad CHANGELOG.md (no '## $core' section)"
if [ -z "$vbad" ]; then ok "versions: header first lines, macros and CHANGELOG agree"
else bad "versions disagree:$vbad"; fi

# 4. the build matrix (portability contracts) and the packages; skipped under sanitizers (RUN_MATRIX=0)
if [ "$RUN_MATRIX" = 1 ]; then
  V=${V:-0} bash tests/matrix.sh > "$log/matrix.out" 2>&1
  # the packages (tests/pkg/run.sh): make install + pkg-config, CMake three ways, meson; its
  # [SKIP] lines name cmake, meson, ninja-build, pkg-config
  CC=$CC bash tests/pkg/run.sh >> "$log/matrix.out" 2>&1
  while IFS= read -r line; do
    case "$line" in
      "[ OK ] "*) ok "${line#\[ OK \] }";;
      "[FAIL] "*) bad "${line#\[FAIL\] }";;
      "[SKIP] "*)
        if [ "${TFRDV_REQUIRE_ALL:-0}" = 1 ]; then bad "${line#\[SKIP\] } (TFRDV_REQUIRE_ALL=1)"
        else skipped=$((skipped + 1)); echo "$line"; fi
        for p in $(printf '%s\n' "$line" | sed -n 's/.*(needs \(.*\))$/\1/p'); do
          case " $need " in *" $p "*) ;; *) need="$need $p";; esac
        done;;
      *) echo "  $line";;
    esac
  done < "$log/matrix.out"
fi

if [ -n "$need" ]; then
  echo "Some matrix cells or package tests need tools that are not installed. To run them too (as CI does):"
  echo "  sudo apt-get install -y --no-install-recommends$need"
fi
if [ "$skipped" -gt 0 ]; then
  echo "$pass passed, $fail failed, $skipped skipped"
else
  echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
