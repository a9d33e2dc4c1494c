#!/usr/bin/env bash
# vkrt-service on llama models that --make-gguf writes with every quantized matrix type (q8_0,
# q4_K, q6_K) and with llama.cpp's Q4_K_M mixture (q4_K, and q6_K in the output head and in
# attn_v and ffn_down of layers 0, 3, 6 and 7 of 8): 24 greedy tokens from BOS on 1 and 2
# devices, every position checked against the float64 reference, the same ids on both, the
# ranks bit-identical; the summary counts the mixture's matrices by type.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${VKRT_BUILDDIR:-build}
case "$builddir" in /*) ;; *) builddir="$root/$builddir" ;; esac
svc="$builddir/bin/vkrt-service"
[ -x "$svc" ] || { echo "skipped: vkrt-service is not in this configuration"; exit 77; }
for k in RMS_NORM ROPE GET_ROWS SET_ROWS ATTENTION ARGMAX Q8_0 Q4_K Q6_K; do
  grep -q "^#define CONFIG_VKRT_KERNEL_$k 1" "$builddir/include/vkrt/config.h" ||
    { echo "skipped: CONFIG_VKRT_KERNEL_$k is not set"; exit 77; }
done
work=$(mktemp -d /tmp/vkrt-types.XXXXXX)
trap 'rm -rf "$work"' EXIT
for dtype in q8_0 q4_K q6_K q4_K_M; do
  layers=2
  [ $dtype = q4_K_M ] && layers=8
  "$svc" --make-gguf "$work/$dtype.gguf" --heads 4 --kv-heads 2 --layers $layers --hidden 512 \
    --ffn 1024 --vocab 1000 --dtype $dtype --seed 3 >/dev/null
  ids_one=""
  for devices in 1 2; do
    out=$("$svc" --weights "$work/$dtype.gguf" --tokens 24 --print-ids --devices $devices --warmup-ms 0 2>&1) ||
      { echo "$out"; echo "$dtype on $devices devices failed"; exit 1; }
    grep -q "verified 24 positions against float64 (teacher-forced): greedy choice the same at every position: passed; .* ranks bit-identical: yes ($devices rank" <<< "$out" ||
      { echo "$out"; echo "$dtype on $devices devices: not verified"; exit 1; }
    case $dtype in
      q4_K_M) want="matrices 49 q4_K + 9 q6_K (layer 0: q/k/v/o q4_K/q4_K/q6_K/q4_K, gate/up/down q4_K/q4_K/q6_K), output q6_K," ;;
      *) want="matrices all $dtype (layer 0: q/k/v/o $dtype/$dtype/$dtype/$dtype, gate/up/down $dtype/$dtype/$dtype), output $dtype," ;;
    esac
    grep -qF "$want" <<< "$out" || { echo "$out"; echo "$dtype: the summary does not say: $want"; exit 1; }
    ids=$(sed -n 's/^ids: //p' <<< "$out")
    [ "$(tr ',' '\n' <<< "$ids" | wc -l)" -eq 24 ] || { echo "$out"; echo "$dtype: not 24 ids"; exit 1; }
    if [ -z "$ids_one" ]; then
      ids_one=$ids
    elif [ "$ids" != "$ids_one" ]; then
      echo "$dtype ids on 2 devices: $ids"; echo "$dtype ids on 1 device: $ids_one"; exit 1
    fi
    echo "$dtype, $devices devices: $(grep -m1 '^vkrt-service: verified' <<< "$out")"
  done
done
