#!/bin/sh
# runs inside the rxe guest (tests/verbs/rxe_vm.sh): the verbs suite on real Soft-RoCE, then the
# example. The last line, "N passed, N failed", counts both (make test-rxe checks it).
cd /tmp
export RXE_DEBUG=${RXE_DEBUG:-}
/bin/rxe_test > t.txt 2>&1; rc=$?
cat t.txt
set -- $(grep -E '^[0-9]+ passed, [0-9]+ failed$' t.txt | tail -1 | tr -d ',')
pass=${1:-0}; fail=${3:-1}
[ $rc = 0 ] || [ $fail != 0 ] || fail=1
echo "== examples/verbs_workers"
/bin/verbs_workers > ex.txt 2>&1; erc=$?
tail -n 3 ex.txt
if [ $erc = 0 ] && grep -q "15/15 tensors intact" ex.txt; then echo "[ OK ] example verbs_workers"; pass=$((pass + 1))
else echo "[FAIL] example verbs_workers"; fail=$((fail + 1)); fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
