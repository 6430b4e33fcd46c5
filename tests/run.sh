#!/usr/bin/env bash
# Runs every test binary and example in $B, then the build matrix, and prints the total as the
# last line: "N passed, N failed". Used by `make test`, `make asan`, `make tsan`, `make valgrind`.
set -u
B=${B:-build/default}
CC=${CC:-cc}
CXX=${CXX:-c++}
RUN_MATRIX=${RUN_MATRIX:-1}
pass=0; fail=0
log=$(mktemp -d); trap 'rm -rf "$log"' EXIT
wrap=()
[ "${VALGRIND:-0}" = 1 ] && wrap=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite)

ok()   { pass=$((pass + 1)); printf '[ OK ] %s\n' "$1"; }
bad()  { fail=$((fail + 1)); printf '[FAIL] %s\n' "$1"; }

# 1. test binaries: add up their "N passed, N failed" lines
for t in "$B"/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  echo "== $name"
  "${wrap[@]}" "$t" > "$log/$name.out" 2>&1; rc=$?
  grep -v '^\[ OK \]' "$log/$name.out" | grep -v '^[0-9]* passed, [0-9]* failed$' | sed 's/^/  /' | head -60
  last=$(tail -n 1 "$log/$name.out")
  if [[ "$last" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2]))
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

# 4. the build matrix (portability contracts); skipped under sanitizers (RUN_MATRIX=0)
if [ "$RUN_MATRIX" = 1 ]; then
  bash tests/matrix.sh > "$log/matrix.out" 2>&1
  while IFS= read -r line; do
    case "$line" in
      "[ OK ] "*) ok "${line#\[ OK \] }";;
      "[FAIL] "*) bad "${line#\[FAIL\] }";;
      "[SKIP] "*) echo "$line";;
      *) echo "  $line";;
    esac
  done < "$log/matrix.out"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
