#!/usr/bin/env bash
# hpcrl's rollout engine side by side with llama.cpp on the same random Qwen2 weights (CPU).
#
#   benchmarks/rollout/llama_cpp/bench_vs_llama_cpp.sh [--build BUILD_DIR] [--quick]
#
# --build   hpcrl build directory (default: build): its `hpcrl` binary is used, and its
#           libhpcrl_*.a when the helper programs of this folder have to be built.
# --quick   the small shape only (4 layers, d=256, Qwen vocabulary); the default adds the
#           Qwen2.5-0.5B shape (24 layers, d=896, 14/2 heads, FFN 4864, tied, QKV bias).
#
# Environment: HPCRL_LLAMA_CACHE (default ~/.cache/hpcrl-llama: llama.cpp source and build,
# helper programs, models, outputs), THREADS (default 2), JOBS (build jobs, default nproc),
# NODE_LLAMA_CPP_VERSION (npm version spec, default latest).
#
# Steps:
#  (a) llama.cpp: `npm pack node-llama-cpp` (its llama/ folder holds llama.cpp as a git bundle),
#      clone the bundle, build CPU-only Release (GGML_NATIVE, no CUDA/Metal/Vulkan/curl/OpenSSL):
#      libllama + llama-batched-bench, and llama_greedy.cpp (this folder) against that libllama.
#      Nothing of llama.cpp is part of hpcrl's build or tree.
#  (b) hpcrl_random_checkpoint (hpcrl's DecoderModel + save_pretrained) writes a seeded random
#      HF checkpoint per shape; the Qwen tokenizer of data/tokenizers/qwen3 is copied beside it.
#  (c) hf_to_gguf (this folder, C++) converts it to GGUF F32 (and F16 for the 0.5B shape).
#  (d) greedy check: 5 prompts x 32 new tokens, hpcrl generate --temperature 0 vs llama_greedy (llama.cpp
#      with an F32 KV cache like hpcrl's, and with its default F16 one); at a divergence, `hpcrl score` gives
#      hpcrl's log-prob gap between the two tokens (a near tie when tiny).
#  (e) throughput with the same threads (OMP_NUM_THREADS / -t, OMP_WAIT_POLICY=PASSIVE): batch-1
#      decode, 1 prompt x 8 samples, and the GRPO shape 16 prompts x 8 samples (32-token prompts,
#      64 new tokens, temperature 1) as generated tokens per second, and the ratio hpcrl/llama.cpp.
#      llama.cpp runs F32 weights with an F32 KV cache, F16 weights with its default F16 cache; hpcrl runs F32.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BUILD=$ROOT/build
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --build=*) BUILD=${1#--build=}; shift ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "unknown option: $1 (expected --build DIR, --quick)" >&2; exit 2 ;;
  esac
done
BUILD=$(cd "$BUILD" && pwd)
HPCRL=$BUILD/hpcrl
[ -x "$HPCRL" ] || { echo "no hpcrl binary at $HPCRL (build hpcrl first, or pass --build DIR)" >&2; exit 2; }
CACHE=${HPCRL_LLAMA_CACHE:-$HOME/.cache/hpcrl-llama}
THREADS=${THREADS:-2}
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
log "building llama.cpp (llama, llama-batched-bench; log: $CACHE/llama.cpp/build.log)"
cmake --build "$LBUILD" -j "$JOBS" --target llama llama-batched-bench > "$CACHE/llama.cpp/build.log" 2>&1 \
  || { tail -n 30 "$CACHE/llama.cpp/build.log" >&2; exit 1; }
LBIN=$LBUILD/bin
LLAMA_GREEDY=$LBUILD/llama_greedy
if [ ! -x "$LLAMA_GREEDY" ] || [ "$HERE/llama_greedy.cpp" -nt "$LLAMA_GREEDY" ] || [ "$LBIN/libllama.so" -nt "$LLAMA_GREEDY" ]; then
  log "building llama_greedy against libllama"
  libdir=$(dirname "$(find -H "$LBUILD" -name 'libllama.so' | head -n 1)")
  c++ -O2 -std=c++17 -I"$LSRC/include" -I"$LSRC/ggml/include" "$HERE/llama_greedy.cpp" -o "$LLAMA_GREEDY" \
    -L"$libdir" -lllama -Wl,-rpath,"$libdir"
fi

# ---------------------------------------------------------------- helper programs (hpcrl side)
if [ -x "$BUILD/benchmarks/rollout/llama_cpp/hpcrl_random_checkpoint" ] && [ -x "$BUILD/benchmarks/rollout/llama_cpp/hf_to_gguf" ]; then
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

hpcrl_gen() {  # model prompts.jsonl out.jsonl extra-args...; prints "N R WALL": hpcrl's own "N tokens, R tok/s"
  local model=$1 prompts=$2 out=$3; shift 3   # (R: generated tokens / generate time, an integer) and the process's
  local t0 t1                                 # wall seconds (model load included)
  t0=$(date +%s.%N)
  "$HPCRL" generate --model "$model" --prompts "$prompts" --out "$out" "$@" 2> "$out.log" \
    || { tail -n 20 "$out.log" >&2; return 1; }
  t1=$(date +%s.%N)
  grep -o '[0-9]* tokens, [0-9]* tok/s' "$out.log" | tail -n 1 | awk -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" '{ print $1, $3, w }'
}

SUMMARY=$OUTDIR/summary.md
: > "$SUMMARY"
{
  echo "# hpcrl vs llama.cpp ($(cat "$CACHE/llama.cpp/VERSION" 2>/dev/null | tr '\n' ' ' | tr -s ' '))"
  echo
  echo "$(nproc) cores, $THREADS threads, OMP_WAIT_POLICY=PASSIVE; $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')"
  echo "hpcrl: $("$HPCRL" version 2>/dev/null | head -n 1)"
  echo
} >> "$SUMMARY"

GREEDY_ROWS="" PERF_ROWS=""
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

  # ---- (e) throughput
  # llama.cpp: batched-bench, no sampling. Per row the generated tokens over (prefill + decode) time, with the
  # prefill of the row's distinct prompts only (1, 1, 16 prompts: their samples share a prefill, as in hpcrl):
  #   batch 1: T_PP(npl 1) + T_TG(npl 1); 1x8: T_PP(npl 1) + T_TG(npl 8); 16x8: T_PP(npl 16) + T_TG(npl 128).
  for t in $types; do
    log "$name $t: llama-batched-bench (-npp 32 -ntg 64 -npl 1,8,16,128)"
    # F32 weights with an F32 KV cache (like hpcrl's fp32 run); F16 weights with llama.cpp's default F16 cache.
    kvargs=(); [ "$t" = f16 ] || kvargs=(-ctk f32 -ctv f32)
    "$LBIN/llama-batched-bench" -m "$dir/model-$t.gguf" -t "$THREADS" -tb "$THREADS" -c 13312 -b 2048 -ub 512 "${kvargs[@]}" \
      -npp 32 -ntg 64 -npl 1,8,16,128 --output-format jsonl > "$OUTDIR/$name-bb-$t.jsonl" 2> "$OUTDIR/$name-bb-$t.log" \
      || { tail -n 20 "$OUTDIR/$name-bb-$t.log" >&2; exit 1; }
  done
  bb() { jq -r --argjson pl "$2" "select(.pl == \$pl) | .$3" "$OUTDIR/$name-bb-$1.jsonl"; }

  log "$name: hpcrl generate (batch 1, 1x8, 16x8)"
  # Each also with 1 new token: the wall-time difference gives hpcrl's decode-only rate, (N - sequences) / (T64 - T1).
  read -r h1_tok h1_rate h1_w <<< "$(hpcrl_gen "$dir" "$OUTDIR/one.jsonl" "$OUTDIR/$name-b1.jsonl" --temperature 0 --max-new-tokens 64)"
  read -r _ _ h1_w1 <<< "$(hpcrl_gen "$dir" "$OUTDIR/one.jsonl" "$OUTDIR/$name-b1-1.jsonl" --temperature 0 --max-new-tokens 1)"
  read -r h8_tok h8_rate h8_w <<< "$(hpcrl_gen "$dir" "$OUTDIR/one.jsonl" "$OUTDIR/$name-b8.jsonl" --n 8 --temperature 1 --max-new-tokens 64)"
  read -r _ _ h8_w1 <<< "$(hpcrl_gen "$dir" "$OUTDIR/one.jsonl" "$OUTDIR/$name-b8-1.jsonl" --n 8 --temperature 1 --max-new-tokens 1)"
  read -r hg_tok hg_rate hg_w <<< "$(hpcrl_gen "$dir" "$OUTDIR/grpo.jsonl" "$OUTDIR/$name-grpo.jsonl" --n 8 --temperature 1 --max-new-tokens 64 --max-batch 128)"
  read -r _ _ hg_w1 <<< "$(hpcrl_gen "$dir" "$OUTDIR/grpo.jsonl" "$OUTDIR/$name-grpo-1.jsonl" --n 8 --temperature 1 --max-new-tokens 1 --max-batch 128)"
  hdec() { awk -v n="$1" -v s="$2" -v a="$3" -v b="$4" 'BEGIN { print (n - s) / (a - b) }'; }
  h1_dec=$(hdec "$h1_tok" 1 "$h1_w" "$h1_w1") h8_dec=$(hdec "$h8_tok" 8 "$h8_w" "$h8_w1") hg_dec=$(hdec "$hg_tok" 128 "$hg_w" "$hg_w1")

  for t in $types; do
    pp1=$(bb "$t" 1 t_pp) pp16=$(bb "$t" 16 t_pp) tg1=$(bb "$t" 1 t_tg) tg8=$(bb "$t" 8 t_tg) tg128=$(bb "$t" 128 t_tg)
    row() {  # label tokens hpcrl_rate llama_seconds llama_tg_speed hpcrl_decode_only
      awk -v l="$1" -v n="$2" -v h="$3" -v s="$4" -v tg="$5" -v hd="$6" -v m="$name" -v p="$params" -v t="$t / KV $( [ "$t" = f16 ] && echo f16 || echo f32 )" 'BEGIN {
        r = n / s; printf "| %s | %s | %s | %s | %d | %.0f | %.0f | %.2fx | %.1f | %.1f | %.2fx |\n", m, p, t, l, n, h, r, h / r, hd, tg, hd / tg }'
    }
    PERF_ROWS+=$(row "batch 1, greedy" 64 "$h1_rate" "$(awk -v a="$pp1" -v b="$tg1" 'BEGIN{print a+b}')" "$(bb "$t" 1 speed_tg)" "$h1_dec")$'\n'
    PERF_ROWS+=$(row "1 prompt x 8 samples, T=1" 512 "$h8_rate" "$(awk -v a="$pp1" -v b="$tg8" 'BEGIN{print a+b}')" "$(bb "$t" 8 speed_tg)" "$h8_dec")$'\n'
    PERF_ROWS+=$(row "GRPO 16 prompts x 8, T=1" 8192 "$hg_rate" "$(awk -v a="$pp16" -v b="$tg128" 'BEGIN{print a+b}')" "$(bb "$t" 128 speed_tg)" "$hg_dec")$'\n'
  done
  bl=$(sed -n 's/.*: \([0-9.]*\) tok\/s.*/\1/p' "$OUTDIR/$name-greedy-llama-f32-kvf32.log")
  PERF_NOTES+="* $name: llama_greedy batch-1 decode (F32, 5 prompts, 31 steps each): $bl tok/s; hpcrl token counts: $h1_tok, $h8_tok, $hg_tok"$'\n'
done

{
  echo "## Greedy agreement (5 prompts x 32 new tokens, temperature 0; hpcrl F32 vs llama.cpp GGUF)"
  echo
  echo "| model | llama.cpp GGUF | llama.cpp KV cache | identical | agreeing leading tokens per prompt | first divergence (prompt@position: hpcrl id/llama.cpp id) | hpcrl log p(its token) - log p(llama.cpp's) there |"
  echo "|---|---|---|---|---|---|---|"
  printf "%s" "$GREEDY_ROWS"
  echo
  echo "## Generated tokens/s (32-token prompts, 64 new tokens)"
  echo
  echo "hpcrl: \`hpcrl generate\`'s printed tok/s (generated tokens / generate time: prefill, decode, sampling; not the"
  echo "model load), F32 weights. llama.cpp: llama-batched-bench (no sampling), generated tokens / (prefill of the"
  echo "row's distinct prompts + decode). Decode-only: llama.cpp's S_TG; hpcrl's (N - sequences) / (wall(64 new tokens)"
  echo "- wall(1 new token)) of two \`hpcrl generate\` processes (decode steps 2..64 with their sampling)."
  echo
  echo "| model | params | llama.cpp weights / KV | workload | generated tokens | hpcrl tok/s | llama.cpp tok/s | hpcrl / llama.cpp | hpcrl decode-only tok/s | llama.cpp decode-only tok/s | decode-only hpcrl / llama.cpp |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  printf "%s" "$PERF_ROWS"
  echo
  printf "%s" "${PERF_NOTES:-}"
} >> "$SUMMARY"
cat "$SUMMARY"
log "outputs in $OUTDIR"
