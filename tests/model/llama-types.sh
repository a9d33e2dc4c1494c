#!/usr/bin/env bash
# vkrt-service on llama models that --make-gguf writes: every quantized matrix type (q8_0,
# q4_K, q6_K) and llama.cpp's Q4_K_M mixture (q4_K, and q6_K in the output head and in attn_v
# and ffn_down of layers 0, 3, 6 and 7 of 8), 24 greedy tokens from BOS; and f16 models whose
# RoPE is scaled — Llama 3.1's rope_freqs.weight (factor 32) and linear scaling
# (llama.rope.scaling.factor 4) — 64 tokens. Each on 1 and 2 devices, every position checked
# against the float64 reference, the same ids on both, the ranks bit-identical, the largest
# logit difference under 1e-3 of the largest logit (a device that ignored the RoPE factors
# is ~1e-2 off at these positions, one that ignored linear scaling chooses other tokens);
# the model line says what the file holds. Files of q4_0, q5_0, q4_1, q5_1, q2_K, q3_K, q5_K
# and bf16 matrices run converted on the host (q8_0 or f32), 24 tokens each, checked the same.
. "$(dirname "$0")/lib.sh"
require_llama Q8_0 Q4_K Q6_K
work=$(mktemp -d /tmp/vkrt-types.XXXXXX)
trap 'rm -rf "$work"' EXIT
shape=(--heads 4 --kv-heads 2 --hidden 512 --ffn 1024 --vocab 1000)
# run NAME TOKENS WANT: NAME.gguf on 1 and 2 devices; WANT is part of the model line
run() {
  local name=$1 tokens=$2 want=$3 ids_one="" devices out ids err
  for devices in 1 2; do
    # shellcheck disable=SC2086 # RUN_ARGS: extra arguments, split on purpose
    out=$("$svc" --weights "$work/$name.gguf" --tokens "$tokens" --print-ids --devices $devices --warmup-ms 0 ${RUN_ARGS:-} 2>&1) ||
      { echo "$out"; echo "$name on $devices devices failed"; exit 1; }
    grep -q "verified $tokens positions against float64 (teacher-forced): greedy choice the same at every position: passed; .* ranks bit-identical: yes ($devices rank" <<< "$out" ||
      { echo "$out"; echo "$name on $devices devices: not verified"; exit 1; }
    err=$(sed -n 's/.*max logit difference \([^ ]*\) of the largest.*/\1/p' <<< "$out")
    awk -v e="$err" 'BEGIN { exit !(e != "" && e + 0 < 1e-3) }' ||
      { echo "$out"; echo "$name on $devices devices: logits ${err:-?} off float64"; exit 1; }
    grep -qF "$want" <<< "$out" || { echo "$out"; echo "$name: the model line does not say: $want"; exit 1; }
    ids=$(sed -n 's/^ids: //p' <<< "$out")
    [ "$(tr ',' '\n' <<< "$ids" | wc -l)" -eq "$tokens" ] || { echo "$out"; echo "$name: not $tokens ids"; exit 1; }
    if [ -z "$ids_one" ]; then
      ids_one=$ids
    elif [ "$ids" != "$ids_one" ]; then
      echo "$name ids on 2 devices: $ids"; echo "$name ids on 1 device: $ids_one"; exit 1
    fi
    echo "$name, $devices devices: $(grep -m1 '^vkrt-service: verified' <<< "$out")"
  done
  run_ids=$ids_one
}
for dtype in q8_0 q4_K q6_K q4_K_M; do
  layers=2
  [ $dtype = q4_K_M ] && layers=8
  "$svc" --make-gguf "$work/$dtype.gguf" "${shape[@]}" --layers $layers --dtype $dtype --seed 3 >/dev/null
  case $dtype in
    q4_K_M) want="matrices 49 q4_K + 9 q6_K (layer 0: q/k/v/o q4_K/q4_K/q6_K/q4_K, gate/up/down q4_K/q4_K/q6_K), output q6_K," ;;
    *) want="matrices all $dtype (layer 0: q/k/v/o $dtype/$dtype/$dtype/$dtype, gate/up/down $dtype/$dtype/$dtype), output $dtype," ;;
  esac
  run $dtype 24 "$want"
  [ $dtype = q4_K ] && q4_k_ids=$run_ids
done
# Types without kernels, converted on the host when the model loads: q4_0 and q5_0 into q8_0
# (the same d, the quants as int8: exact), the others into f32; the model line says so and
# every position is checked against the float64 reference of the file's own values.
for dtype in q4_0 q5_0 q4_1 q5_1 q2_K q3_K q5_K bf16; do
  case $dtype in q4_0|q5_0) to=q8_0 ;; *) to=f32 ;; esac
  "$svc" --make-gguf "$work/$dtype.gguf" "${shape[@]}" --layers 2 --dtype $dtype --seed 7 >/dev/null
  run $dtype 24 "converted on the host (no kernels for their types; the values as ggml dequantizes them): 16 $dtype -> $to"
done
# --convert f16: the same file's q5_K into f16 instead (half the memory), checked the same
cp "$work/q5_K.gguf" "$work/q5_K_f16.gguf"
RUN_ARGS="--convert f16" run q5_K_f16 24 "rounded to f16 (--convert f16)): 16 q5_K -> f16"
# The q4_K file above ran its q/k/v and gate/up products with the norms and the swiglu in
# their dispatch (vkrt_op_matmul_fused, the default); --fuse none records them one by one:
# checked the same, the same ids; and the default run said it fused.
cp "$work/q4_K.gguf" "$work/q4_K_unfused.gguf"
RUN_ARGS="--fuse none" run q4_K_unfused 24 "fused products (--fuse none): the RMS norm into 0 and the swiglu into 0 per token"
[ "$run_ids" = "$q4_k_ids" ] || { echo "q4_K --fuse none: $run_ids, fused: $q4_k_ids"; exit 1; }
out=$("$svc" --weights "$work/q4_K.gguf" --tokens 2 --devices 1 --warmup-ms 0 --verify 0 2>&1)
grep -q "fused products (--fuse auto): the RMS norm into 5 and the swiglu into 2 per token" <<< "$out" ||
  { echo "$out"; echo "q4_K: the products not fused by default"; exit 1; }
# auto folds the norm only up to hidden 4096: a hidden-4352 file gets the swiglu alone
"$svc" --make-gguf "$work/wide.gguf" --heads 34 --kv-heads 2 --hidden 4352 --ffn 512 --vocab 400 --layers 1 --dtype q4_K --seed 3 >/dev/null
out=$("$svc" --weights "$work/wide.gguf" --tokens 4 --devices 1 --warmup-ms 0 --verify 4 2>&1)
grep -q "fused products (--fuse auto): the RMS norm into 0 and the swiglu into 1 per token" <<< "$out" &&
  grep -q "verified 4 positions against float64 (teacher-forced): greedy choice the same at every position: passed" <<< "$out" ||
  { echo "$out"; echo "hidden 4352: not the swiglu alone, verified"; exit 1; }
# 8-bit x (--activations q8): auto folds both into the q8x kernel (q4_K and q8_0), which rounds x g (the
# separate ops round the normalized x: values at a rounding tie may fall the other way, and
# the 8-bit rounding moves the logits far more than the margins here, so neither run is held
# to float64's choices; test_quant checks the kernel against its float64 definition)
for dtype in q4_K q8_0; do
  out=$("$svc" --weights "$work/$dtype.gguf" --tokens 24 --print-ids --devices 2 --warmup-ms 0 --verify 0 --activations q8 2>&1) ||
    { echo "$out"; echo "$dtype --activations q8 failed"; exit 1; }
  grep -q "fused products (--fuse auto): the RMS norm into 5 and the swiglu into 2 per token" <<< "$out" &&
    grep -q "(--fuse-rope on): 2 per token on device 0" <<< "$out" &&
    [ "$(sed -n 's/^ids: //p' <<< "$out" | tr ',' '\n' | wc -l)" -eq 24 ] ||
    { echo "$out"; echo "$dtype --activations q8: the products not fused by default, or not 24 ids"; exit 1; }
  # the q/k/v products turn q and K and write the cache rows themselves (--fuse-rope on, the
  # default: one dispatch a layer instead of four): the same ids as the separate ops
  # (--fuse-rope off) on as many devices (two devices sum their partial products in another
  # order than one: near ties may differ)
  for devices in 1 2; do
    ids_fused=$(sed -n 's/^ids: //p' <<< "$out")
    if [ $devices = 1 ]; then
      ids_fused=$("$svc" --weights "$work/$dtype.gguf" --tokens 24 --print-ids --devices 1 --warmup-ms 0 --verify 0 --activations q8 2>&1 | sed -n 's/^ids: //p')
    fi
    sep=$("$svc" --weights "$work/$dtype.gguf" --tokens 24 --print-ids --devices $devices --warmup-ms 0 --verify 0 --activations q8 --fuse-rope off 2>&1) ||
      { echo "$sep"; echo "$dtype --fuse-rope off failed"; exit 1; }
    grep -q "(--fuse-rope off): 0 per token on device 0" <<< "$sep" &&
      [ "$(sed -n 's/^ids: //p' <<< "$sep")" = "$ids_fused" ] ||
      { echo "$sep"; echo "$dtype --fuse-rope off, $devices devices: fused, or other ids than $ids_fused"; exit 1; }
  done
done
echo "fusion: auto folds norm and swiglu at hidden 512 (f32 and 8-bit x), the swiglu alone at 4352; --fuse none the same ids; --fuse-rope off the same ids"

"$svc" --make-gguf "$work/rope_freqs.gguf" "${shape[@]}" --layers 2 --dtype f16 --rope-freqs 32 --seed 5 >/dev/null
run rope_freqs 64 "RoPE base 10000 with rope_freqs.weight, matrices"
# f16 products fold the norms and the swiglu too (the matrix-vector kernel's fused form):
# said so by default; --fuse none records them one by one, checked the same, the same ids
f16_ids=$run_ids
out=$("$svc" --weights "$work/rope_freqs.gguf" --tokens 2 --devices 1 --warmup-ms 0 --verify 0 2>&1)
grep -q "fused products (--fuse auto): the RMS norm into 5 and the swiglu into 2 per token" <<< "$out" ||
  { echo "$out"; echo "f16: the products not fused by default"; exit 1; }
cp "$work/rope_freqs.gguf" "$work/rope_freqs_unfused.gguf"
RUN_ARGS="--fuse none" run rope_freqs_unfused 64 "fused products (--fuse none): the RMS norm into 0 and the swiglu into 0 per token"
[ "$run_ids" = "$f16_ids" ] || { echo "f16 --fuse none: $run_ids, fused: $f16_ids"; exit 1; }
"$svc" --make-gguf "$work/rope_linear.gguf" "${shape[@]}" --layers 2 --dtype f16 --rope-linear 4 --seed 5 >/dev/null
run rope_linear 64 "RoPE base 10000, angles x 0.25, matrices"
