#!/usr/bin/env bash
# TensorBoardWriter's files, read by Google's protobuf library (read_tfevents.py)
# rather than by code of ours: writes one with write_tfevents, and checks that the
# reader finds exactly the scalars it was given, rounded to float32, with the
# non-finite and beyond-float32 ones left out. Then damages copies of the file to
# show the reader really checks the CRCs and the cut-off tail a crash leaves.
#
#   tensorboard_reader_check.sh WRITE_TFEVENTS_BINARY
#
# Exit 77 (CTest's SKIP_RETURN_CODE) when no Python 3 with google.protobuf is
# found ($PYTHON, python3, /usr/bin/python3): Debian's python3-protobuf provides it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
writer=${1:?usage: tensorboard_reader_check.sh WRITE_TFEVENTS_BINARY}

py=""
for candidate in ${PYTHON:-} python3 /usr/bin/python3; do
  if "$candidate" -c 'import google.protobuf' 2>/dev/null; then py=$candidate; break; fi
done
if [ -z "$py" ]; then
  echo "SKIP: no python3 that imports google.protobuf (apt-get install python3-protobuf)"
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$writer" "$tmp/tb" >"$tmp/inputs.jsonl" 2>"$tmp/path.txt"
"$py" "$here/read_tfevents.py" "$tmp/tb" >"$tmp/read.jsonl"

# Expected = the inputs through the writer's documented rules, applied here.
"$py" - "$tmp/inputs.jsonl" "$tmp/read.jsonl" <<'EOF'
import json, math, struct, sys
FLT_MAX = struct.unpack("<f", bytes.fromhex("ffff7f7f"))[0]
def expected(line):
    x = line["input"]
    if isinstance(x, str) or abs(x) > FLT_MAX:  # nan/inf, or inf once in float32
        return None
    return {"tag": line["tag"], "step": line["step"], "value": struct.unpack("<f", struct.pack("<f", x))[0]}
inputs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
want = [e for e in map(expected, inputs) if e is not None]
got = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
def key(e):  # -0.0 == 0.0 in Python: compare the sign too
    return (e["tag"], e["step"], e["value"], math.copysign(1, e["value"]))
if list(map(key, got)) != list(map(key, want)):
    for i, (g, w) in enumerate(zip(got, want)):
        if key(g) != key(w):
            sys.exit(f"scalar {i}: read {g}, wrote {w}")
    sys.exit(f"read {len(got)} scalars, wrote {len(want)}")
print(f"tensorboard_reader_check: {len(got)} scalars read back exactly "
      f"({len(inputs) - len(want)} non-finite or beyond float32 skipped, as documented)")
EOF

file=$(cat "$tmp/path.txt")
size=$(stat -c %s "$file")
must_fail() {  # what: the reader must reject the file
  if "$py" "$here/read_tfevents.py" "$tmp/bad" >/dev/null 2>"$tmp/err"; then
    echo "FAIL: reader accepted a file with $1"; exit 1
  fi
  echo "rejected $1: $(cat "$tmp/err")"
}
# A flipped bit in the last record's data, then in the first record's length CRC.
cp "$file" "$tmp/bad"
"$py" -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[-6]^=0x41; open(p,"wb").write(b)' "$tmp/bad"
must_fail "a corrupted data byte"
cp "$file" "$tmp/bad"
"$py" -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[9]^=0x10; open(p,"wb").write(b)' "$tmp/bad"
must_fail "a corrupted length CRC"
# Cut inside the last record, as a killed run can leave it: an error unless
# --allow-truncated, which must then read every complete record.
head -c $((size - 3)) "$file" >"$tmp/bad"
must_fail "a cut-off last record"
kept=$("$py" "$here/read_tfevents.py" --allow-truncated "$tmp/bad" | wc -l)
[ "$kept" -eq $(($(wc -l <"$tmp/read.jsonl") - 1)) ] || { echo "FAIL: --allow-truncated kept $kept scalars"; exit 1; }
echo "tensorboard_reader_check: OK (reader $py)"
