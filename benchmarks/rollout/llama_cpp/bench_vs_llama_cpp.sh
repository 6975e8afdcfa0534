#!/usr/bin/env bash
# hpcrl's rollout engine side by side with llama.cpp on the same random Qwen2 weights (CPU).
#
#   benchmarks/rollout/llama_cpp/bench_vs_llama_cpp.sh [--build BUILD_DIR] [--quick | --shape NAME]
#
# --build   hpcrl build directory (default: build): its `hpcrl` binary is used, and its
#           libhpcrl_*.a when the helper programs of this folder have to be built.
# --quick   the small shape only (4 layers, d=256, Qwen vocabulary); the default adds the
#           Qwen2.5-0.5B shape (24 layers, d=896, 14/2 heads, FFN 4864, tied, QKV bias).
# --shape   one shape only: small or qwen2.5-0.5b.
#
# Environment: HPCRL_LLAMA_CACHE (default ~/.cache/hpcrl-llama: llama.cpp source and build,
# helper programs, models, outputs), THREADS (default 2), JOBS (build jobs, default nproc),
# NODE_LLAMA_CPP_VERSION (npm version spec, default latest), ROUNDS (default 3), WORKLOADS (a
# subset of "b1 x8 grpo tail", the default; the bandwidth note needs b1).
#
# Steps:
#  (a) llama.cpp: `npm pack node-llama-cpp` (its llama/ folder holds llama.cpp as a git bundle),
#      clone the bundle, build CPU-only Release (GGML_NATIVE, no CUDA/Metal/Vulkan/curl/OpenSSL):
#      libllama, and llama_greedy.cpp and llama_batched.cpp (this folder) against that libllama.
#      Nothing of llama.cpp is part of hpcrl's build or tree.
#  (b) hpcrl_random_checkpoint (hpcrl's DecoderModel + save_pretrained) writes a seeded random
#      HF checkpoint per shape; the Qwen tokenizer of data/tokenizers/qwen3 is copied beside it.
#  (c) hf_to_gguf (this folder, C++) converts it to GGUF F32 (and F16 for the 0.5B shape).
#  (d) greedy check: 5 prompts x 32 new tokens, hpcrl generate --temperature 0 vs llama_greedy (llama.cpp
#      with an F32 KV cache like hpcrl's, and with its default F16 one); at a divergence, `hpcrl score` gives
#      hpcrl's log-prob gap between the two tokens (a near tie when tiny).
#  (e) throughput with the same threads (OMP_NUM_THREADS / -t, OMP_WAIT_POLICY=PASSIVE), ROUNDS rounds
#      (default 3) interleaving the two engines, medians reported: batch-1 greedy decode, 1 prompt x 8
#      samples, the GRPO shape 16 prompts x 8 samples (32-token prompts, 64 new tokens, temperature 1),
#      and its long-tail variant (up to 256 new tokens, ending at stop strings: the response lengths hpcrl
#      draws are replayed by llama.cpp, so both generate the same tokens). llama.cpp runs through
#      llama_batched.cpp (libllama's C API: each prompt prefilled once, its KV cells shared by its samples,
#      llama.cpp's own sampler per sequence). Generated tokens/s, decode-only tokens/s, the ratios
#      hpcrl / llama.cpp, and at batch 1 the share of the copy bandwidth (memory_bandwidth, measured in
#      each round) that the weight traffic reaches. llama.cpp runs F32 weights with an F32 KV cache,
#      F16 weights with its default F16 cache; hpcrl runs F32.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BUILD=$ROOT/build
QUICK=0
ONLY_SHAPE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --build=*) BUILD=${1#--build=}; shift ;;
    --quick) QUICK=1; shift ;;
    --shape) ONLY_SHAPE=$2; shift 2 ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) echo "unknown option: $1 (expected --build DIR, --quick, --shape NAME)" >&2; exit 2 ;;
  esac
done
BUILD=$(cd "$BUILD" && pwd)
HPCRL=$BUILD/hpcrl
[ -x "$HPCRL" ] || { echo "no hpcrl binary at $HPCRL (build hpcrl first, or pass --build DIR)" >&2; exit 2; }
CACHE=${HPCRL_LLAMA_CACHE:-$HOME/.cache/hpcrl-llama}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
JOBS=${JOBS:-$(nproc)}
TOKDIR=$ROOT/data/tokenizers/qwen3
export OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=PASSIVE
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
log() { echo "[bench_vs_llama_cpp $(date +%H:%M:%S)] $*" >&2; }
for tool in npm git cmake c++ jq awk; do
  command -v $tool >/dev/null || { echo "bench_vs_llama_cpp needs '$tool' on PATH" >&2; exit 2; }
done
GEN=Ninja; command -v ninja >/dev/null || GEN="Unix Makefiles"

# ---------------------------------------------------------------- (a) llama.cpp
LSRC=$CACHE/llama.cpp/src LBUILD=$CACHE/llama.cpp/build
if [ ! -f "$LSRC/include/llama.h" ]; then
  log "fetching llama.cpp through npm (node-llama-cpp@${NODE_LLAMA_CPP_VERSION:-latest})"
  rm -rf "$CACHE/npm" "$LSRC"; mkdir -p "$CACHE/npm"
  tgz=$(cd "$CACHE/npm" && npm pack "node-llama-cpp@${NODE_LLAMA_CPP_VERSION:-latest}" --silent 2>/dev/null | tail -n 1)
  tar xzf "$CACHE/npm/$tgz" -C "$CACHE/npm" package/llama package/package.json
  bundle=$(find "$CACHE/npm/package/llama" -name '*.bundle' | head -n 1)
  [ -n "$bundle" ] || { echo "no *.bundle in $tgz's llama/ folder" >&2; exit 1; }
  mkdir -p "$(dirname "$LSRC")"
  git -c advice.detachedHead=false clone -q "$bundle" "$LSRC"
  { jq -r '"node-llama-cpp " + .version' "$CACHE/npm/package/package.json"
    cat "$CACHE/npm/package/llama/llama.cpp.info.json" 2>/dev/null || true; } > "$CACHE/llama.cpp/VERSION"
  rm -f "$CACHE/npm/$tgz"
fi
if [ ! -f "$LBUILD/CMakeCache.txt" ]; then
  log "configuring llama.cpp (CPU only, Release, GGML_NATIVE)"
  cmake -S "$LSRC" -B "$LBUILD" -G "$GEN" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_HIP=OFF -DGGML_SYCL=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=OFF > "$CACHE/llama.cpp/configure.log" 2>&1 \
    || { tail -n 30 "$CACHE/llama.cpp/configure.log" >&2; exit 1; }
fi
log "building llama.cpp (llama; log: $CACHE/llama.cpp/build.log)"
cmake --build "$LBUILD" -j "$JOBS" --target llama > "$CACHE/llama.cpp/build.log" 2>&1 \
  || { tail -n 30 "$CACHE/llama.cpp/build.log" >&2; exit 1; }
LBIN=$LBUILD/bin
LLAMA_GREEDY=$LBUILD/llama_greedy LLAMA_BATCHED=$LBUILD/llama_batched
for driver in llama_greedy llama_batched; do
  exe=$LBUILD/$driver
  if [ ! -x "$exe" ] || [ "$HERE/$driver.cpp" -nt "$exe" ] || [ "$HERE/llama_driver.h" -nt "$exe" ] || [ "$LBIN/libllama.so" -nt "$exe" ]; then
    log "building $driver against libllama"
    libdir=$(dirname "$(find -H "$LBUILD" -name 'libllama.so' | head -n 1)")
    c++ -O2 -std=c++17 -I"$LSRC/include" -I"$LSRC/ggml/include" "$HERE/$driver.cpp" -o "$exe" \
      -L"$libdir" -lllama -Wl,-rpath,"$libdir"
  fi
done

# ---------------------------------------------------------------- helper programs (hpcrl side)
if [ -x "$BUILD/benchmarks/rollout/llama_cpp/hpcrl_random_checkpoint" ] && [ -x "$BUILD/benchmarks/rollout/llama_cpp/hf_to_gguf" ] \
   && [ -x "$BUILD/benchmarks/rollout/llama_cpp/memory_bandwidth" ]; then
  TOOLS=$BUILD/benchmarks/rollout/llama_cpp
else
  TOOLS=$CACHE/tools-$(echo "$BUILD" | cksum | cut -d' ' -f1)
  log "building hpcrl_random_checkpoint and hf_to_gguf in $TOOLS (against $BUILD)"
  if [ ! -f "$TOOLS/CMakeCache.txt" ]; then
    cmake -S "$HERE" -B "$TOOLS" -G "$GEN" -DCMAKE_BUILD_TYPE=Release -DHPCRL_BUILD_DIR="$BUILD" > "$TOOLS.configure.log" 2>&1 \
      || { tail -n 30 "$TOOLS.configure.log" >&2; exit 1; }
  fi
  cmake --build "$TOOLS" -j "$JOBS" > "$TOOLS.build.log" 2>&1 || { tail -n 30 "$TOOLS.build.log" >&2; exit 1; }
fi

# ---------------------------------------------------------------- (b) checkpoints, (c) GGUF
VOCAB=$(jq '[.model.vocab[], (.added_tokens[].id)] | max + 1' "$TOKDIR/tokenizer.json")
VOCAB_SIZE=151936  # Qwen2/2.5/3 config vocab_size: the tokenizer's $VOCAB ids padded to a multiple of 128
[ "$VOCAB" -le "$VOCAB_SIZE" ] || { echo "tokenizer has $VOCAB ids > $VOCAB_SIZE" >&2; exit 1; }
EOS=$(jq -r '.eos_token' "$TOKDIR/tokenizer_config.json")
EOS_ID=$(jq --arg t "$EOS" '[.added_tokens[] | select(.content == $t) | .id][0]' "$TOKDIR/tokenizer.json")

make_model() {  # name layers hidden heads kv_heads ffn
  local name=$1 dir=$CACHE/models/$1
  mkdir -p "$dir"
  cat > "$dir/config.wanted.json" <<EOF
{
  "architectures": ["Qwen2ForCausalLM"],
  "model_type": "qwen2",
  "vocab_size": $VOCAB_SIZE,
  "hidden_size": $3,
  "num_hidden_layers": $2,
  "num_attention_heads": $4,
  "num_key_value_heads": $5,
  "intermediate_size": $6,
  "hidden_act": "silu",
  "max_position_embeddings": 32768,
  "rope_theta": 1000000.0,
  "rms_norm_eps": 1e-06,
  "tie_word_embeddings": true,
  "use_sliding_window": false,
  "bos_token_id": 151643,
  "eos_token_id": 151643,
  "torch_dtype": "float32"
}
EOF
  if [ ! -f "$dir/model.safetensors" ] || ! cmp -s "$dir/config.wanted.json" "$dir/config.source.json"; then
    log "writing random checkpoint $name (hpcrl_random_checkpoint)"
    rm -f "$dir"/*.gguf
    "$TOOLS/hpcrl_random_checkpoint" "$dir/config.wanted.json" "$dir" --seed 1 >&2
    cp "$dir/config.wanted.json" "$dir/config.source.json"
    cp "$TOKDIR/tokenizer.json" "$TOKDIR/tokenizer_config.json" "$dir/"
  fi
  local t
  for t in $7; do
    if [ ! -f "$dir/model-$t.gguf" ]; then
      log "converting $name to GGUF $t"
      "$TOOLS/hf_to_gguf" "$dir" "$dir/model-$t.gguf" --type "$t" >&2
    fi
  done
}

SHAPES=("small 4 256 4 2 1024 f32")
[ "$QUICK" = 1 ] || SHAPES+=("qwen2.5-0.5b 24 896 14 2 4864 f32 f16")
if [ -n "$ONLY_SHAPE" ]; then
  for s in "${SHAPES[@]}"; do [ "${s%% *}" = "$ONLY_SHAPE" ] && SHAPES=("$s") && break; done
  [ "${SHAPES[0]%% *}" = "$ONLY_SHAPE" ] || { echo "--shape: no shape '$ONLY_SHAPE' (small, qwen2.5-0.5b)" >&2; exit 2; }
fi

# ---------------------------------------------------------------- prompts (fixed, pseudo-random ids)
OUTDIR=$CACHE/out; mkdir -p "$OUTDIR"
# 5 greedy prompts of 8..32 tokens and 16 GRPO prompts of 32 tokens, ids in the byte-level BPE range.
awk 'BEGIN { srand(7); n = split("8 12 16 24 32", L, " ");
  for (p = 1; p <= n; ++p) { s = ""; for (i = 0; i < L[p]; ++i) s = s (i ? " " : "") int(rand() * 150000); print s } }' \
  > "$OUTDIR/greedy.txt"
awk 'BEGIN { srand(11); for (p = 0; p < 16; ++p) { s = ""; for (i = 0; i < 32; ++i) s = s (i ? " " : "") int(rand() * 150000); print s } }' \
  > "$OUTDIR/grpo.txt"
to_jsonl() { awk '{ gsub(/ /, ", "); print "{\"prompt_ids\": [" $0 "]}" }' "$1"; }
to_jsonl "$OUTDIR/greedy.txt" > "$OUTDIR/greedy.jsonl"
to_jsonl "$OUTDIR/grpo.txt" > "$OUTDIR/grpo.jsonl"
head -n 1 "$OUTDIR/grpo.jsonl" > "$OUTDIR/one.jsonl"
head -n 1 "$OUTDIR/grpo.txt" > "$OUTDIR/one.txt"

hpcrl_gen() {  # model prompts.jsonl out.jsonl extra-args...; prints hpcrl generate's own figures:
  local model=$1 prompts=$2 out=$3; shift 3   # "TOKENS TOK/S PREFILL_S DECODE_S DECODE_TOK/S"
  "$HPCRL" generate --model "$model" --prompts "$prompts" --out "$out" "$@" 2> "$out.log" \
    || { tail -n 20 "$out.log" >&2; return 1; }
  sed -n 's/.* \([0-9]*\) tokens, \([0-9]*\) tok\/s; prefill \([0-9.]*\) s, decode \([0-9.]*\) s (\([0-9.]*\) tok\/s).*/\1 \2 \3 \4 \5/p' \
    "$out.log" | tail -n 1
}
llama_run() {  # model.gguf prompts.txt n lengths kv extra-args...; prints "TOKENS TOK/S PREFILL_S DECODE_S DECODE_TOK/S"
  local gguf=$1 prompts=$2 n=$3 lengths=$4 kv=$5; shift 5
  local sequences=$(( $(wc -l < "$prompts") * n ))
  "$LLAMA_BATCHED" "$gguf" "$prompts" "$n" "$THREADS" "$lengths" --kv "$kv" "$@" 2>> "$OUTDIR/llama_batched.log" \
    | awk -v s="$sequences" '{ printf "%s %s %s %s %.2f\n", $2, $8, $4, $6, ($2 - s) / ($6 > 0 ? $6 : 1e-9) }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

SUMMARY=$OUTDIR/summary.md
: > "$SUMMARY"
{
  echo "# hpcrl vs llama.cpp ($(cat "$CACHE/llama.cpp/VERSION" 2>/dev/null | tr '\n' ' ' | tr -s ' '))"
  echo
  echo "$(nproc) cores, $THREADS threads, OMP_WAIT_POLICY=PASSIVE, $ROUNDS interleaved rounds; $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p'); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "hpcrl: $("$HPCRL" version 2>/dev/null | head -n 1)"
  echo
} >> "$SUMMARY"

# The long-tail variant ends a response at any of these stop strings (each in ~0.1-0.6 % of the
# Qwen vocabulary's tokens; ~1.5 % together): geometric lengths of mean ~65, a few reach 256.
TAIL_STOPS=(--stop "," --stop ";" --stop "!" --stop "?" --stop "Q")
WORKLOADS=${WORKLOADS:-b1 x8 grpo tail}
for wl in $WORKLOADS; do
  case $wl in b1|x8|grpo|tail) ;; *) echo "WORKLOADS: unknown workload '$wl' (b1 x8 grpo tail)" >&2; exit 2 ;; esac
done
declare -A WL_LABEL=([b1]="batch 1, greedy, 64 new tokens" [x8]="1 prompt x 8 samples, T=1, 64 new tokens"
                     [grpo]="GRPO 16 prompts x 8, T=1, 64 new tokens" [tail]="GRPO long tail 16 x 8, T=1, <= 256 new tokens, stop strings")
GREEDY_ROWS="" PERF_ROWS="" PERF_NOTES=""
for shape in "${SHAPES[@]}"; do
  set -- $shape
  name=$1; types="${*:7}"
  make_model "$1" "$2" "$3" "$4" "$5" "$6" "$types"
  dir=$CACHE/models/$name
  params=$(stat -c %s "$dir/model.safetensors" | awk '{ printf "%.1fM", $1 / 4 / 1e6 }')

  # ---- (d) greedy agreement
  log "$name: greedy check (5 prompts x 32 tokens)"
  hpcrl_gen "$dir" "$OUTDIR/greedy.jsonl" "$OUTDIR/$name-greedy-hpcrl.jsonl" --temperature 0 --max-new-tokens 32 >/dev/null
  jq -r '.response_ids | map(tostring) | join(" ")' "$OUTDIR/$name-greedy-hpcrl.jsonl" > "$OUTDIR/$name-greedy-hpcrl.txt"
  # llama.cpp with an F32 KV cache (as hpcrl's), and with its default F16 cache.
  checks="f32:f32 f32:f16"; [[ " $types " == *" f16 "* ]] && checks+=" f16:f32"
  for combo in $checks; do
    t=${combo%:*} kv=${combo#*:} g=$OUTDIR/$name-greedy-llama-$t-kv$kv
    "$LLAMA_GREEDY" "$dir/model-$t.gguf" "$OUTDIR/greedy.txt" 32 "$THREADS" --kv "$kv" "$EOS_ID" > "$g.txt" 2> "$g.log" \
      || { tail -n 20 "$g.log" >&2; exit 1; }
    # per prompt: the number of leading tokens that agree; each divergence "prompt position hpcrl_id llama_id" to $g.div
    agree=$(paste -d'|' "$OUTDIR/$name-greedy-hpcrl.txt" "$g.txt" | awk -F'|' -v divfile="$g.div" '
      BEGIN { all = 1; printf "" > divfile }
      { n = split($1, a, " "); m = split($2, b, " "); k = 0; while (k < n && k < m && a[k+1] == b[k+1]) ++k;
        same = (k == n && n == m); all = all && same; out = out (NR > 1 ? ", " : "") k "/" n
        if (!same) { div = div sprintf(" p%d@%d:%s/%s", NR - 1, k, a[k+1], b[k+1]); print NR - 1, k, a[k+1], b[k+1] > divfile } }
      END { printf "%s|%s|%s\n", (all ? "yes" : "no"), out, (div == "" ? "-" : div) }')
    IFS='|' read -r same per div <<< "$agree"
    # Near tie? hpcrl's log-prob of its own token minus that of llama.cpp's, in the same context (hpcrl score).
    gaps=""
    while read -r p k a b; do
      [ -n "$b" ] || continue
      ctx=$(sed -n "$((p + 1))p" "$OUTDIR/greedy.txt")
      [ "$k" -eq 0 ] || ctx="$ctx $(sed -n "$((p + 1))p" "$OUTDIR/$name-greedy-hpcrl.txt" | cut -d' ' -f1-"$k")"
      la=$("$HPCRL" score --model "$dir" --ids "$(echo $ctx $a | tr ' ' ',')" --json 2>/dev/null < /dev/null | jq '.logprobs[-1]')
      lb=$("$HPCRL" score --model "$dir" --ids "$(echo $ctx $b | tr ' ' ',')" --json 2>/dev/null < /dev/null | jq '.logprobs[-1]')
      gaps+=" p$p: $(awk -v x="$la" -v y="$lb" 'BEGIN { printf "%.2g", x - y }')"
    done < "$g.div"
    GREEDY_ROWS+="| $name | $t | $kv | $same | $per | $div | ${gaps:- -} |"$'\n'
    log "$name GGUF $t, KV $kv: identical=$same ($per)${gaps:+; hpcrl log-prob gap at the divergence:$gaps}"
  done

  # ---- (e) throughput: ROUNDS rounds, each running every workload on both engines in turn.
  R=$OUTDIR/$name-rounds.txt   # lines: round engine workload tokens tok/s prefill_s decode_s decode_tok/s
  : > "$R"
  for round in $(seq 1 "$ROUNDS"); do
    echo "$round bandwidth - $("$TOOLS/memory_bandwidth" "$THREADS")" >> "$R"
    for wl in $WORKLOADS; do
      case $wl in
        b1)   hp=("$OUTDIR/one.jsonl" --temperature 0 --max-new-tokens 64); lp=("$OUTDIR/one.txt" 1 64 --greedy) ;;
        x8)   hp=("$OUTDIR/one.jsonl" --n 8 --temperature 1 --max-new-tokens 64); lp=("$OUTDIR/one.txt" 8 64) ;;
        grpo) hp=("$OUTDIR/grpo.jsonl" --n 8 --temperature 1 --max-new-tokens 64 --max-batch 128); lp=("$OUTDIR/grpo.txt" 8 64) ;;
        tail) hp=("$OUTDIR/grpo.jsonl" --n 8 --temperature 1 --max-new-tokens 256 --max-batch 128 "${TAIL_STOPS[@]}")
              lp=("$OUTDIR/grpo.txt" 8 "$OUTDIR/$name-tail-lengths.txt") ;;
      esac
      log "$name round $round/$ROUNDS: $wl"
      out=$OUTDIR/$name-$wl-hpcrl.jsonl
      echo "$round hpcrl $wl $(hpcrl_gen "$dir" "${hp[0]}" "$out" "${hp[@]:1}")" >> "$R"
      # The samples' response lengths (prompt-major), for llama.cpp to replay in the long-tail variant.
      [ "$wl" = tail ] && jq -s -r 'sort_by(.prompt_index, .sample_index)[] | .response_ids | length' "$out" \
        > "$OUTDIR/$name-tail-lengths.txt"
      for t in $types; do
        kv=f32; [ "$t" = f16 ] && kv=f16
        echo "$round llama-$t $wl $(llama_run "$dir/model-$t.gguf" "${lp[0]}" "${lp[1]}" "${lp[2]}" "$kv" "${lp[@]:3}")" >> "$R"
      done
    done
  done

  # Medians over the rounds.
  med() { awk -v e="$1" -v w="$2" -v c="$3" '$2 == e && $3 == w { print $c }' "$R" | median; }
  bw=$(med bandwidth - 4)
  wbytes=$(stat -c %s "$dir/model.safetensors")   # batch 1 reads every weight once per token (the tied head included)
  for t in $types; do
    lb=$wbytes; [ "$t" = f16 ] && lb=$(stat -c %s "$dir/model-f16.gguf")
    for wl in $WORKLOADS; do
      PERF_ROWS+=$(awk -v m="$name" -v p="$params" -v t="$t" -v l="${WL_LABEL[$wl]}" -v n="$(med hpcrl "$wl" 4)" \
        -v h="$(med hpcrl "$wl" 5)" -v r="$(med "llama-$t" "$wl" 5)" -v hd="$(med hpcrl "$wl" 8)" -v rd="$(med "llama-$t" "$wl" 8)" 'BEGIN {
        printf "| %s | %s | %s | %s | %d | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx |\n", m, p, toupper(t), l, n, h, r, h / r, hd, rd, hd / rd }')$'\n'
    done
    [[ " $WORKLOADS " == *" b1 "* ]] && PERF_NOTES+=$(awk -v m="$name" -v t="$t" -v bw="$bw" -v hb="$wbytes" -v lb="$lb" -v hd="$(med hpcrl b1 8)" -v rd="$(med "llama-$t" b1 8)" 'BEGIN {
      printf "* %s, batch-1 decode weight traffic against the %.1f GB/s copy bandwidth: hpcrl F32 %.1f GB/s = %.0f%%; llama.cpp %s %.1f GB/s = %.0f%%",
        m, bw, hd * hb / 1e9, 100 * hd * hb / 1e9 / bw, toupper(t), rd * lb / 1e9, 100 * rd * lb / 1e9 / bw }')$'\n'
  done
  # The same share round by round, each against the copy bandwidth measured in its own round (this VM's
  # bandwidth drifts between rounds), then the median of those shares.
  share() { awk -v e="$1" -v b="$2" '$2 == "bandwidth" { bw[$1] = $4 } $2 == e && $3 == "b1" { d[$1] = $8 }
    END { for (r in d) if (r in bw) printf "%.4f\n", 100 * d[r] * b / 1e9 / bw[r] }' "$R" | median; }
  [[ " $WORKLOADS " == *" b1 "* ]] && PERF_NOTES+=$(printf "* %s, the batch-1 shares round by round (median of each round's decode against that round's copy bandwidth): hpcrl F32 %.0f%%%s" \
    "$name" "$(share hpcrl "$wbytes")" "$(for t in $types; do lb=$wbytes; [ "$t" = f16 ] && lb=$(stat -c %s "$dir/model-f16.gguf"); printf "; llama.cpp %s %.0f%%" "${t^^}" "$(share "llama-$t" "$lb")"; done)")$'\n'
  PERF_NOTES+="* $name: per-round figures in $R"$'\n'
  [ -f "$OUTDIR/$name-tail-lengths.txt" ] && PERF_NOTES+="* $name: long-tail response lengths: $(sort -n "$OUTDIR/$name-tail-lengths.txt" | awk '{ v[NR] = $1; s += $1 } END { printf "mean %.0f, median %d, max %d, %d tokens", s / NR, v[int((NR + 1) / 2)], v[NR], s }')"$'\n'
done

{
  echo "## Greedy agreement (5 prompts x 32 new tokens, temperature 0; hpcrl F32 vs llama.cpp GGUF)"
  echo
  echo "| model | llama.cpp GGUF | llama.cpp KV cache | identical | agreeing leading tokens per prompt | first divergence (prompt@position: hpcrl id/llama.cpp id) | hpcrl log p(its token) - log p(llama.cpp's) there |"
  echo "|---|---|---|---|---|---|---|"
  printf "%s" "$GREEDY_ROWS"
  echo
  echo "## Generated tokens/s (32-token prompts; medians of $ROUNDS interleaved rounds)"
  echo
  echo "hpcrl: \`hpcrl generate\`'s own figures (generated tokens / generate time: prefill, decode, sampling; not the"
  echo "model load), F32 weights. llama.cpp: llama_batched (libllama; the same prompts, each prefilled once and shared by"
  echo "its samples; llama.cpp's sampler), generated tokens / (prefill + decode). Decode-only: the tokens after each"
  echo "sequence's first over the decode steps' time (sampling included), both engines."
  echo
  echo "| model | params | llama.cpp weights | workload | generated tokens | hpcrl tok/s | llama.cpp tok/s | hpcrl / llama.cpp | hpcrl decode-only tok/s | llama.cpp decode-only tok/s | decode-only hpcrl / llama.cpp |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  printf "%s" "$PERF_ROWS"
  echo
  printf "%s" "$PERF_NOTES"
  echo "* load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
} >> "$SUMMARY"
cat "$SUMMARY"
log "outputs in $OUTDIR"
