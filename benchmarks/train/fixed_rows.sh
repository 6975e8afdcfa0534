#!/bin/bash
# Writes a JSONL file of ROWS SFT rows of exactly P + R tokens each with the
# byte tokenizer: a prompt of P-1 characters and a response of R-1 (BOS and EOS
# add one each), so a benchmark step processes a known number of tokens.
#   benchmarks/train/fixed_rows.sh OUT.jsonl ROWS P R
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 OUT.jsonl ROWS P R" >&2; exit 2; }
awk -v rows="$2" -v p=$(($3 - 1)) -v r=$(($4 - 1)) 'BEGIN {
  a = "abcdefghijklmnopqrstuvwxyz0123456789 "
  for (i = 0; i < rows; i++) {
    q = ""; s = ""
    for (k = 0; k < p; k++) q = q substr(a, (i * 7 + k * 3) % 37 + 1, 1)
    for (k = 0; k < r; k++) s = s substr(a, (i * 11 + k * 5) % 37 + 1, 1)
    printf "{\"question\": \"%s\", \"answer\": \"%s\"}\n", q, s
  }
}' > "$1"
