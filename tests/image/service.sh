#!/usr/bin/env bash
# vkrt-service: verified decode on 2 and 4 simulated devices, with the import-fails fault off
# and on (the plan then shows pre-stage); GGUF weights of every type (f32, f16, q8_0, q4_K, q6_K),
# also cut into many small import chunks so tensors straddle chunk edges; bad weights files
# (truncated, not GGUF, missing tensors) and shape mismatches fail clearly. (A real llama model,
# tests/data/stories260K.gguf, runs in tests/model/stories.sh.)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${VKRT_BUILDDIR:-build}
case "$builddir" in /*) ;; *) builddir="$root/$builddir" ;; esac
svc="$builddir/bin/vkrt-service"
[ -x "$svc" ] || { echo "vkrt-service not in this configuration"; exit 0; }
work=$(mktemp -d /tmp/vkrt-svc.XXXXXX)
trap 'rm -rf "$work"' EXIT
w="$work/w.gguf"
"$svc" --make-weights "$w" --layers 3 --hidden 128 --ffn 512 --dtype f16 >/dev/null # --make-gguf's alias
for devices in 2 4; do
  for fault in off on; do
    args=(--weights "$w" --tokens 20 --devices "$devices")
    [ $fault = on ] && args+=(--fault import-fails)
    out=$("$svc" "${args[@]}" 2>&1) || { echo "$out"; echo "service failed: $devices devices, fault $fault"; exit 1; }
    grep -q "float64: max relative error [^:]*: passed; ranks bit-identical: yes" <<< "$out" || { echo "$out"; exit 1; }
    if [ $fault = on ]; then
      grep -q "weights via mapped: .*; prestaged: " <<< "$out" || { echo "$out"; echo "fault on but no pre-stage in the plan"; exit 1; }
    else
      grep -q "weights via mapped: .*; imported: " <<< "$out" || { echo "$out"; echo "fault off but weights not imported"; exit 1; }
    fi
    echo "$devices devices, import fault $fault: $(echo "$out" | grep -m1 'tokens/s')"
  done
done
# Every weight type on 2 devices (ffn cut along whole blocks) and on 1 (the residual rides
# on vkrt_op_matmul_add, quantized ffn_down included); f16 and q4_K
# also with 64 KiB import chunks: the 32-byte aligned tensors straddle chunk edges.
for dtype in f32 f16 q8_0 q4_K q6_K; do
  "$svc" --make-gguf "$work/$dtype.gguf" --layers 2 --hidden 512 --ffn 1536 --dtype $dtype >/dev/null
  for devices in 2 1; do
    out=$("$svc" --weights "$work/$dtype.gguf" --tokens 17 --devices $devices 2>&1) \
      || { echo "$out"; echo "$dtype on $devices devices failed"; exit 1; }
    grep -q "gate/up/down $dtype/$dtype/$dtype" <<< "$out" && grep -q "float64: max relative error [^:]*: passed; ranks bit-identical: yes" <<< "$out" \
      || { echo "$out"; echo "$dtype on $devices devices: not verified"; exit 1; }
    echo "gguf $dtype, $devices devices: $(grep -m1 'tokens/s' <<< "$out")"
  done
done
# vkrt-probe says which activation path the quantized matvec takes, with and without the option
probe="$builddir/bin/vkrt-probe"
if [ -x "$probe" ]; then
  grep -q "^vkrt-probe .* (board " <<< "$("$probe" --version)" || { echo "vkrt-probe --version"; exit 1; }
  out=$("$probe")
  grep -q "quantized matvec activations: f32 (vkrt_options.quant_activations = VKRT_ACTIVATIONS_F32)" <<< "$out" \
    || grep -q "activations: none: no quantized kernels" <<< "$out" \
    || { echo "$out"; echo "vkrt-probe: no f32 activation path line"; exit 1; }
  out=$("$probe" --activations q8)
  grep -q "quantized matvec activations: 8-bit for one column" <<< "$out" \
    || grep -q "quantized matvec activations: f32: 8-bit activations were asked for, but the device lacks" <<< "$out" \
    || grep -q "activations: none: no quantized kernels" <<< "$out" \
    || { echo "$out"; echo "vkrt-probe --activations q8: no activation path line"; exit 1; }
  echo "vkrt-probe --activations q8: $(grep -m1 'quantized matvec activations' <<< "$out")"
  # and which kernel vkrt_op_matmul_fused takes: 8-bit x g where the q8x kernels run (after
  # the f16 and f32 weights' path)
  grep -q "fused products (vkrt_op_matmul_fused): f16 and f32 w, .*; q4_K and q8_0 w, one column: the q8x kernels" <<< "$out" \
    || grep -q "quantized matvec activations: f32: 8-bit activations were asked for" <<< "$out" \
    || grep -q "fused products (vkrt_op_matmul_fused): .*none: no quantized kernels" <<< "$out" \
    || { echo "$out"; echo "vkrt-probe --activations q8: no fused-products line naming the q8x kernels"; exit 1; }
  # ... and which take the q/k/v product's RoPE and cache rows (vkrt_matmul_fusion.qkv)
  grep -q "q/k/v products with their RoPE and KV-cache rows (vkrt_matmul_fusion.qkv): q4_K and q8_0 w, one column: the q8x kernels" <<< "$out" \
    || grep -q "quantized matvec activations: f32: 8-bit activations were asked for" <<< "$out" \
    || grep -q "(vkrt_matmul_fusion.qkv): q[48]_[0K] w, one column" <<< "$out" \
    || grep -q "(vkrt_matmul_fusion.qkv): none: the q4_K and q8_0 kernels are not in this build" <<< "$out" \
    || { echo "$out"; echo "vkrt-probe --activations q8: no q/k/v line naming the q8x kernels"; exit 1; }
fi
# 8-bit activations (VKRT_ACTIVATIONS_Q8): the reference rounds x as the device does, within
# the f32 bound; a device that kept x in f32 would be ~1e-2 off and fail it (q6_K too: a
# reference that kept its x in f32 is 6e-3 off)
for dtype in q8_0 q4_K q6_K; do
  for devices in 2 1; do
    out=$("$svc" --weights "$work/$dtype.gguf" --tokens 17 --devices $devices --activations q8 2>&1) \
      || { echo "$out"; echo "$dtype with 8-bit activations on $devices devices failed"; exit 1; }
    grep -q "(8-bit activations): passed; ranks bit-identical: yes" <<< "$out" \
      || { echo "$out"; echo "$dtype with 8-bit activations on $devices devices: not verified"; exit 1; }
    echo "gguf $dtype, 8-bit activations, $devices devices: $(grep -m1 'verified' <<< "$out")"
  done
done
if grep -q "^CONFIG_VKRT_FAULT_INJECTION=y" "$builddir/.config" 2>/dev/null || grep -q chunk-cap <<< "$("$svc" --help)"; then
  for dtype in f16 q4_K; do
    set +e
    out=$("$svc" --weights "$work/$dtype.gguf" --tokens 17 --import-chunk-cap 65536 2>&1); rc=$?
    set -e
    if [ $rc -eq 2 ] && grep -q "need CONFIG_VKRT_FAULT_INJECTION" <<< "$out"; then break; fi
    chunks=$(sed -n 's/.*registered the .* in \([0-9]*\) chunks.*/\1/p' <<< "$out")
    [ $rc -eq 0 ] && [ "${chunks:-0}" -gt 8 ] && grep -q "float64: max relative error [^:]*: passed; ranks bit-identical: yes" <<< "$out" \
      || { echo "$out"; echo "$dtype with 64 KiB import chunks: not verified (rc $rc, $chunks chunks)"; exit 1; }
    echo "gguf $dtype in $chunks import chunks of 64 KiB: verified"
  done
fi
# A GGUF without ffn_up (the writer's file with the tensor renamed): missing tensor, exit 3.
sed 's/blk\.1\.ffn_up\.weight/blk.1.ffn_UP.weight/' "$work/q8_0.gguf" > "$work/noup.gguf"
set +e
out=$("$svc" --weights "$work/noup.gguf" --tokens 2 2>&1); rc=$?
set -e
[ $rc -eq 3 ] && grep -q "missing tensor blk.1.ffn_up.weight" <<< "$out" || { echo "$out (rc $rc)"; echo "missing tensor not reported"; exit 1; }
# Not a GGUF file.
head -c 4096 /dev/zero > "$work/zero.bin"
set +e
out=$("$svc" --weights "$work/zero.bin" --tokens 2 2>&1); rc=$?
set -e
[ $rc -eq 3 ] && grep -q "not a GGUF file" <<< "$out" || { echo "$out (rc $rc)"; echo "non-GGUF file not reported"; exit 1; }
# Truncated file: clear message, exit 3, no crash.
head -c 20000 "$w" > "$work/trunc.bin"
set +e
out=$("$svc" --weights "$work/trunc.bin" --tokens 2 2>&1); rc=$?
set -e
[ $rc -eq 3 ] && grep -q "truncated" <<< "$out" || { echo "$out (rc $rc)"; echo "truncated file not reported"; exit 1; }
set +e
out=$("$svc" --weights "$w" --hidden 256 --tokens 2 2>&1); rc=$?
set -e
[ $rc -eq 3 ] && grep -q "shape mismatch" <<< "$out" || { echo "$out (rc $rc)"; echo "wrong --hidden not reported"; exit 1; }
set +e
out=$("$svc" --weights /nonexistent 2>&1); rc=$?
set -e
[ $rc -eq 3 ] || { echo "$out"; exit 1; }
set +e
out=$("$svc" --weights "$work" 2>&1); rc=$?
set -e
[ $rc -eq 3 ] && grep -q "a directory, not a GGUF weights file" <<< "$out" || { echo "$out (rc $rc)"; echo "a directory as --weights not reported"; exit 1; }
# --version and --json (the summary as one JSON object, last line)
grep -q "^vkrt-service .* (board " <<< "$("$svc" --version)" || { "$svc" --version; echo "no --version"; exit 1; }
out=$("$svc" --weights "$w" --tokens 4 --json 2>&1) || { echo "$out"; exit 1; }
tail -1 <<< "$out" | python3 -c "import json,sys; d=json.load(sys.stdin); assert d['tokens'] == 4 and d['verified'] and d['ranks_bit_identical'], d" ||
  { echo "$out"; echo "--json: no valid summary object"; exit 1; }
echo "bad inputs: truncated file, not GGUF, missing tensor, wrong --hidden, missing file, a directory -> exit 3 with a message; --version, --json"
# --load-knobs (a build with the lab) refuses values that would wrap: a count past 2^32, a
# size past 2^64 once scaled, a number past 2^64; and an AFTER other than 0 or 1; sane ones
# load, packing as the readers read and once each chunk is read.
if grep -q "^#define CONFIG_VKRT_LAB 1" "$builddir/include/vkrt/config.h"; then
  for knobs in 4294967296,1M,4 4,17179869184G,4 4,1M,4194304K 99999999999999999999,1M,4 \
               4,1M,4,0,0,2; do
    out=$("$svc" --weights "$w" --tokens 2 --load-knobs $knobs 2>&1) && rc=0 || rc=$?
    [ $rc -eq 2 ] && grep -q "load-knobs $knobs: want THREADS" <<< "$out" ||
      { echo "$out (rc $rc)"; echo "--load-knobs $knobs: not refused"; exit 1; }
  done
  for knobs in 2,1M,4 2,1M,4,0,0,1; do
    "$svc" --weights "$w" --tokens 2 --load-knobs $knobs >/dev/null 2>&1 ||
      { echo "--load-knobs $knobs failed"; exit 1; }
  done
  echo "--load-knobs: values that wrap and AFTER 2 refused (exit 2), 2,1M,4 and 2,1M,4,0,0,1 load"
fi
