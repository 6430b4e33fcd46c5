#!/usr/bin/env bash
# Builds tests/fuzz_keys.c (keys, device names, frame:iter, TF_CONFIG) as a libFuzzer target and
# runs it for FUZZ_SECONDS (default 60).
# Exits non-zero when the fuzzer finds a crash or a broken invariant (reproducer in build/fuzz/).
# The seed corpus is generated here into build/fuzz/corpus (never committed).
set -eu
cd "$(dirname "$0")/.."
. tests/fuzzlib.sh
fuzz_build fuzz fuzz_keys tests/fuzz_keys.c -Itests -lpthread

S=/job:a/replica:0/task:0/device:CPU:0
D=/job:b/replica:0/task:0/device:CPU:0
seeds=(
  "$S;00000000000000ab;$D;e;0:0" "$S;AB;$D;e;0:0" "$S;00000000000000ab;$D;e;0:0;"
  "$S;00000000000000ab;$D;e;garbage" ";00000000000000ab;$D;e;0:0" "/cpu:0;1;/gpu:0;e;0:0"
  "$S;ffffffffffffffff;$D;edge_5_x;18446744073709551615:-1" "$S;10000000000000000;$D;e;0:0"
  "/job:foo/replica:1/task:2/device:GPU:3" "/job:foo/replica:1/task:2/gpu:3" "/job:*/device:GPU/replica:4"
  "/gpu:*/job:*/replica:4" "/job:foo/CPU:*" "/device:*:0" "/job:x/job:y" "/replica:2147483647"
  "/job:foo/cpu:1/task:2/replica:1" "/device:myspecialdevice:13" "/" "CPU:10" "myspecialdevice"
  "0:0" "7:-42" "0:-9223372036854775808" "18446744073709551615:-1" "0:9223372036854775807"
  "0:18446744073709551620" "00:-00"
  '{"cluster": {"ps": ["host:2222"], "worker": ["h1:2222", "h2:2222"]}, "task": {"type": "worker", "index": 1}}'
  '{"cluster":{"chief":["c:1"],"worker":{"1":"w\u00e9:1","3":"x"}},"task":{"type":"evaluator","index":"0"},"rpc_layer":"grpc"}'
  '{"environment":"cloud","x":[1,-2.5e3,{"a":[true,null]},"\ud83d\ude00"],"cluster":{}}'
)
i=0
for s in "${seeds[@]}"; do printf '%s' "$s" > "$out/corpus/seed_$i"; i=$((i + 1)); done
# hostile seeds: nesting at and past the 32-level limit, huge numbers, an embedded NUL, non-UTF-8,
# an overlong job name and key
deep=$(printf '[%.0s' $(seq 40)); printf '{"x":%s1' "$deep" > "$out/corpus/deep"
printf '{"cluster":{"w":["a"]},"task":{"type":"w","index":99999999999999999999999}}' > "$out/corpus/hugeidx"
printf '{"cluster":{"w":["a"]},"task":{"type":"w","index":-0.0e-99999}}' > "$out/corpus/negzero"
printf '{"cluster":{"w":["a\x00b"]},"task":{"type":"w","index":0}}' > "$out/corpus/nul"
printf '{"cluster":{"w":["\xc0\xaf","\xed\xa0\x80","\xf4\x90\x80\x80"]}}' > "$out/corpus/badutf8"
printf '{"cluster":{"w":{"4294967296":"a","2147483648":"b"}},"task":{"type":"w","index":"2147483648"}}' > "$out/corpus/bigtasks"
printf '{"cluster":{"%s":["a"]}}' "$(head -c 3000 /dev/zero | tr '\0' j)" > "$out/corpus/longjob"
printf '/job:%s/replica:0/task:0/device:CPU:0;1;/job:b/replica:0/task:0/device:CPU:0;e;0:0' \
  "$(head -c 3000 /dev/zero | tr '\0' j)" > "$out/corpus/longkey"
printf '/job:a\x00/replica:2147483648/task:0;1;/device:CPU:99999999999;e\x00;0:0' > "$out/corpus/nulkey"
printf '"/job:"\n"/replica:"\n"/task:"\n"/device:"\n"/cpu:"\n"/gpu:"\n"/CPU:"\n"/GPU:"\n";"\n":"\n"*"\n"-"\n' \
  > "$out/keys.dict"
printf '"{"\n"}"\n"["\n"]"\n"\\""\n"\\\\u"\n"cluster"\n"task"\n"type"\n"index"\n' \
  >> "$out/keys.dict"

fuzz_run fuzz_keys -dict="$out/keys.dict"
