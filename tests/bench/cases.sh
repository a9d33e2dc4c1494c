#!/usr/bin/env bash
# vkrt-bench cases on lavapipe: the quick subset of tools/bench/cases/decode.txt (every case
# verified against the CPU reference: #wrong 0, nothing skipped), and a file of bad lines
# (each reported on its own line, the good lines around them still run and verify).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${VKRT_BUILDDIR:-build}
case "$builddir" in /*) ;; *) builddir="$root/$builddir" ;; esac
bench="$builddir/bin/vkrt-bench"
[ -x "$bench" ] || { echo "vkrt-bench not in this configuration"; exit 0; }
# (the build's config.h: a .config from before a symbol existed does not name it)
if ! grep -q '^#define CONFIG_VKRT_LAB 1$' "$builddir/include/vkrt/config.h"; then
  out=$("$bench" cases 2>&1) && { echo "vkrt-bench cases ran without the lab"; exit 1; }
  grep -q "needs the lab" <<< "$out" || { echo "vkrt-bench cases without the lab says: $out"; exit 1; }
  echo "skipped: vkrt-bench cases needs the lab (CONFIG_VKRT_LAB is not set)"; exit 77
fi
grep -q '^  cases ' <<< "$("$bench" --help)" || { echo "vkrt-bench has no cases command"; exit 1; }
grep -q "^vkrt-bench .* (board " <<< "$("$bench" --version)" || { echo "vkrt-bench --version"; exit 1; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

quick="$root/tools/bench/cases/quick.txt"
out=$("$bench" cases --test-file "$quick" --json) || { echo "$out"; echo "cases run failed (#wrong > 0?)"; exit 1; }
want=$(grep -cv '^\s*\(#\|$\)' "$quick")
[ "$(json "d['cases_run']" <<< "$out")" = "$want" ] || { echo "$out"; echo "not every case ran ($want expected)"; exit 1; }
[ "$(json "d['line_errors']" <<< "$out")" = 0 ] || { echo "$out"; echo "quick subset has line errors"; exit 1; }
[ "$(json "d['wrong_total']" <<< "$out")" = 0 ] || { echo "$out"; echo "#wrong > 0"; exit 1; }
[ "$(json "sum(r['checked'] for r in d['results'])" <<< "$out")" -gt 0 ] || { echo "nothing checked"; exit 1; }
# wall clock against GPU time: every case says whether it was compared, the summary counts them
[ "$(json "d['wall_cases'] == sum(r['wall_checked'] for r in d['results']) >= d['wall_within']" <<< "$out")" = True ] \
  || { echo "$out"; echo "wall clock summary does not add up"; exit 1; }
# the layouts take the paths they are there for
for path in "matvec" "tiled matmul" "concat" "copy"; do
  json "[r['path'] for r in d['results']]" <<< "$out" | grep -q "$path" || { echo "$out"; echo "no case took the $path path"; exit 1; }
done
# the quantized weights take their own matrix-vector kernels
for path in "matvec q8_0" "matvec q4_K" "matvec q6_K"; do
  json "[r['path'] for r in d['results']]" <<< "$out" | grep -q "$path" || { echo "$out"; echo "no case took the $path path"; exit 1; }
done
# the decode ops, argmax of a vocabulary over several workgroups
for path in "rms_norm (mul fused)" "rope normal" "rope neox" "get_rows" "set_rows" \
            "argmax split + combine" "argmax one pass"; do
  json "[r['path'] for r in d['results']]" <<< "$out" | grep -qF "$path" || { echo "$out"; echo "no case took the $path path"; exit 1; }
done
# decode attention (FLASH_ATTN_EXT lines) runs as vkrt_op_attention, its ratio the K/V roofline
# (the row split pass up to 4 query heads per KV head, the tiles above: quick.txt has both)
fa_paths=$(json "[r['path'] for r in d['results'] if r['op'] == 'FLASH_ATTN_EXT']" <<< "$out")
grep -qE "attention rows, [0-9]+ splits" <<< "$fa_paths" && grep -qE "attention tiles, [0-9]+ splits" <<< "$fa_paths" \
  || { echo "$out"; echo "FLASH_ATTN_EXT cases did not take both split passes: $fa_paths"; exit 1; }
json "min(r['kv_roofline_ratio'] for r in d['results'] if r['op'] == 'FLASH_ATTN_EXT') > 0" <<< "$out" | grep -q True \
  || { echo "$out"; echo "no K/V roofline ratio"; exit 1; }
echo "quick subset: $want cases, #wrong 0 (q8_0, q4_K and q6_K through the quantized matrix-vector kernels, FLASH_ATTN_EXT through the attention)"
# a short context in a larger cache (--kv-len): each query attends its first 37 rows while the
# split plan stays the capacity's; every split count --variants forces verified too
fa_lines=$(mktemp)
grep '^FLASH_ATTN_EXT' "$quick" > "$fa_lines"
out=$("$bench" cases --test-file "$fa_lines" --json --kv-len 37 --variants) \
  || { rm -f "$fa_lines"; echo "$out"; echo "--kv-len run failed (#wrong > 0?)"; exit 1; }
rm -f "$fa_lines"
[ "$(json "d['wrong_total'] == 0 and len(d['results']) > 0 and all(r['kv_len'] == 37 for r in d['results'])" <<< "$out")" = True ] \
  || { echo "$out"; echo "--kv-len 37: #wrong > 0 or kv_len not 37"; exit 1; }
echo "FLASH_ATTN_EXT lines attending 37 rows of their cache (--kv-len), every split count: #wrong 0"
# the GPU paths (transposed-view copies through the tiled transpose, concat as per-source
# copies) verified here too: lavapipe itself prefers the per-element kernels
out=$("$bench" cases --test-file "$quick" --json --tiled-copies on) || { echo "$out"; echo "tiled-copies run failed"; exit 1; }
[ "$(json "d['wrong_total']" <<< "$out")" = 0 ] || { echo "$out"; echo "#wrong > 0 with tiled copies"; exit 1; }
for path in "copy via tiled transpose" "concat per-source copies"; do
  json "[r['path'] for r in d['results']]" <<< "$out" | grep -q "$path" || { echo "$out"; echo "no case took the $path path"; exit 1; }
done
echo "quick subset with --tiled-copies on: #wrong 0 (copy via tiled transpose, concat per-source copies)"
# VKRT_ACTIVATIONS_Q8: the one-column quantized cases take the 8-bit-x kernels (within the
# rounding bound), the others the f32 ones; q8_0 attention on the row kernel rounds the
# queries (lavapipe runs the rows at every length), f16 caches and the tiles do not
out=$("$bench" cases --test-file "$quick" --json --activations q8) || { echo "$out"; echo "q8 activations run failed"; exit 1; }
[ "$(json "d['wrong_total']" <<< "$out")" = 0 ] || { echo "$out"; echo "#wrong > 0 with 8-bit activations"; exit 1; }
for path in "matvec q8_0, 8-bit x" "matvec q4_K, 8-bit x"; do
  json "[r['path'] for r in d['results']]" <<< "$out" | grep -qF "$path" || { echo "$out"; echo "no case took the $path path"; exit 1; }
done
# q6_K: the one-column line through its 8-bit-x kernel (K 768: every other super-block at
# 2 mod 4 bytes), the five-column one with f32 x
[ "$(json "[r['path'] for r in d['results'] if r['name'] in ('mv.q6_K', 'mv.q6_K.m5.padded-rows')]" <<< "$out")" = "['matvec q6_K, 8-bit x', 'matvec q6_K']" ] \
  || { echo "$out"; echo "q6_K lines with --activations q8: not the 8-bit-x kernel for one column and the f32-x one for five"; exit 1; }
q8_0_lines=$(grep -n '^FLASH_ATTN_EXT .* q8_0 ' "$quick" | cut -d: -f1 | paste -sd,) # K and V q8_0
bad=$(json "[r['line'] for r in d['results'] if r['path'].startswith('attention') and \
  (r['path'].endswith('8-bit q') != (r['path'].startswith('attention rows') and r['line'] in [$q8_0_lines]))]" <<< "$out")
[ "$bad" = "[]" ] || { echo "$out"; echo "attention with --activations q8: 8-bit queries not exactly on the q8_0 row-kernel lines (lines $bad)"; exit 1; }
json "[r['path'] for r in d['results']]" <<< "$out" | grep -qF "8-bit q" || { echo "$out"; echo "no attention line rounded its queries"; exit 1; }
echo "quick subset with --activations q8: #wrong 0 (one-column q8_0/q4_K/q6_K through the 8-bit-x kernels, q8_0 row attention on 8-bit queries)"

# vkrt_options.quant_activations_columns 8: the small batches of q8_0 and q4_K w on the
# 8-bit-x column kernels from each type's crossover (vkrt-probe's line) up to M 8, within the
# rounding bound; q6_K and the tiled lines as before
prompt="$root/tools/bench/cases/prompt-quick.txt"
probe_out=$("$(dirname "$bench")/vkrt-probe" --activations q8 --q8-columns 8 2>&1) || { echo "$probe_out"; echo "vkrt-probe --q8-columns 8 failed"; exit 1; }
line=$(grep 'dev0 quantized matvec activations' <<< "$probe_out")
from=$(sed -n 's/.* from M \([0-9]*\) for q8_0 w and M \([0-9]*\) for q4_K.*/\1 \2/p' <<< "$line")
[ -n "$from" ] || { echo "$line"; echo "vkrt-probe --q8-columns 8: no crossover in the activations line"; exit 1; }
read -r from_q8_0 from_q4_K <<< "$from"
out=$("$bench" cases --test-file "$prompt" --json --activations q8 --q8-columns 8) || { echo "$out"; echo "q8 columns run failed"; exit 1; }
[ "$(json "d['wrong_total']" <<< "$out")" = 0 ] || { echo "$out"; echo "#wrong > 0 with 8-bit columns"; exit 1; }
bad=$(json "[r['name'] for r in d['results'] if r['path'].startswith('matvec') and \
  r['path'].endswith('8-bit x') != (int(r['name'].rsplit('.m', 1)[1]) >= {'q8_0': $from_q8_0, 'q4_K': $from_q4_K}.get(r['name'].split('.')[1], 99))]" <<< "$out")
[ "$bad" = "[]" ] || { echo "$out"; echo "8-bit columns not exactly from the crossover ($from_q8_0 q8_0, $from_q4_K q4_K): $bad"; exit 1; }
json "[r['path'] for r in d['results']]" <<< "$out" | grep -qF "matvec q8_0, 8-bit x" || { echo "$out"; echo "no small batch took 8-bit x"; exit 1; }
echo "prompt-quick with --activations q8 --q8-columns 8: #wrong 0, 8-bit columns from M $from_q8_0 (q8_0) and $from_q4_K (q4_K)"

# the prompt and small-batch shapes of prompt.txt, scaled down: M past the crossover through the
# tiled kernel for every weight type, M 2..8 on the matrix-vector kernels; then with the
# crossover at 2 (vkrt-bench --min-m) every line through the tiled kernel
out=$("$bench" cases --test-file "$prompt" --json) || { echo "$out"; echo "prompt run failed (#wrong > 0?)"; exit 1; }
want=$(grep -cv '^\s*\(#\|$\)' "$prompt")
[ "$(json "d['cases_run']" <<< "$out")" = "$want" ] || { echo "$out"; echo "not every prompt case ran"; exit 1; }
[ "$(json "d['wrong_total']" <<< "$out")" = 0 ] || { echo "$out"; echo "prompt #wrong > 0"; exit 1; }
bad_paths=$(json "[r['name'] for r in d['results'] if (int(r['name'].rsplit('.m', 1)[1]) > 8) != r['path'].startswith('tiled matmul')]" <<< "$out")
[ "$bad_paths" = "[]" ] || { echo "$out"; echo "wrong path (tiled past M 8, matrix-vector up to it): $bad_paths"; exit 1; }
for t in f32 f16 q8_0 q4_K q6_K; do
  json "[r['path'] for r in d['results'] if r['name'].startswith('pp.$t.')]" <<< "$out" | grep -q "tiled matmul" \
    || { echo "$out"; echo "no $t case took the tiled kernel"; exit 1; }
done
out=$("$bench" cases --test-file "$prompt" --json --min-m 2) || { echo "$out"; echo "prompt run with --min-m 2 failed"; exit 1; }
[ "$(json "d['wrong_total']" <<< "$out")" = 0 ] || { echo "$out"; echo "prompt #wrong > 0 with --min-m 2"; exit 1; }
[ "$(json "all(r['path'].startswith('tiled matmul') for r in d['results'])" <<< "$out")" = True ] \
  || { echo "$out"; echo "--min-m 2: not every case took the tiled kernel"; exit 1; }
# split K only where vkrt-probe says the device plans it (a residency estimate for its tiles)
if grep -q 'dev0 matmul: .*K never split' <<< "$probe_out"; then
  [ "$(json "any('split K' in r['path'] for r in d['results'])" <<< "$out")" = False ] \
    || { echo "$out"; echo "split K taken where vkrt-probe says K is never split"; exit 1; }
fi
echo "prompt subset: $want cases, #wrong 0 (tiled past M 8, matrix-vector up to it; all tiled with --min-m 2)"
# K in 4 pieces (the lab's count; every K here is 4 steps or more): every tiled case splits,
# its path says so, and the reduced results are checked
out=$("$bench" cases --test-file "$prompt" --json --min-m 2 --lab matmul_split_k=4) || { echo "$out"; echo "prompt run with split K failed"; exit 1; }
[ "$(json "d['wrong_total']" <<< "$out")" = 0 ] || { echo "$out"; echo "prompt #wrong > 0 with split K"; exit 1; }
[ "$(json "all(r['path'].startswith('tiled matmul') and r['path'].endswith('split K') for r in d['results'])" <<< "$out")" = True ] \
  || { echo "$out"; echo "split K forced: not every case split"; exit 1; }
echo "prompt subset with K in 4 pieces: #wrong 0, every case split"
# VKRT_MATMUL_ACTIVATIONS_F16 on a device without cooperative matrices: the f32 paths, exact
out=$("$bench" cases --test-file "$prompt" --json --activations f16) || { echo "$out"; echo "prompt run with --activations f16 failed"; exit 1; }
[ "$(json "d['wrong_total']" <<< "$out")" = 0 ] || { echo "$out"; echo "prompt #wrong > 0 with --activations f16"; exit 1; }
[ "$(json "any('coopmat' in r['path'] for r in d['results'])" <<< "$out")" = False ] \
  || { echo "$out"; echo "--activations f16: cooperative matrices on a device without them"; exit 1; }
echo "prompt subset with --activations f16: #wrong 0, no cooperative matrices on this device"
# --parts: every tile swept and checked; the best so far also in strips of row tiles (checked)
# and without its multiply and without its loads (wrong by design, not counted)
one=$(mktemp)
trap 'rm -f "$one"' EXIT
grep -F 'pp.f16.k448.n128.m64' "$prompt" > "$one"
out=$("$bench" cases --test-file "$one" --json --parts --iters 2 --warmup-ms 0) || { echo "$out"; echo "--parts run failed"; exit 1; }
[ "$(json "d['wrong_total']" <<< "$out")" = 0 ] || { echo "$out"; echo "--parts: #wrong > 0"; exit 1; }
tiles=$(json "d['results'][0]['tiles']" <<< "$out")
for want in "t['parts'] == 1" "t['parts'] == 2" "t['order'] == 1 and t['wrong'] == 0" "t['order'] == 4 and t['wrong'] == 0" \
            "t['parts'] == 0 and t['order'] == 0 and t['wrong'] == 0"; do
  [ "$(json "any($want for t in d['results'][0]['tiles'])" <<< "$out")" = True ] \
    || { echo "$tiles"; echo "--parts: no swept tile with $want"; exit 1; }
done
echo "prompt line with --parts: tiles checked (#wrong 0), strips of 1 and 4 checked, the parts timed"

bad="$root/tests/bench/bad-lines.txt"
out=$("$bench" cases --test-file "$bad") || { echo "$out"; echo "bad-lines run failed"; exit 1; }
for pattern in "line 4: error: unknown or unsupported op 7" "line 5: error: truncated" \
               "line 6: error: result: ne0 = -4" "line 7: error: src0: strides reach past a 2^31-element view" \
               "line 8: error: field 4 (ne1): 'x' is not a number" "line 9: error: type: ggml type 9 is not supported" \
               "line 11: error: src0: ne0 = 300 is not a multiple of the q4_K block (256 elements)" \
               "line 12: error: type: q8_0 is supported only as MUL_MAT's src0 (the weights)" \
               "line 14: error: FLASH_ATTN_EXT: max_bias and logit_softcap must be 0"; do
  grep -qF "$pattern" <<< "$out" || { echo "$out"; echo "missing: $pattern"; exit 1; }
done
grep -q "^4 cases run, 9 lines with errors, #wrong total 0$" <<< "$out" || { echo "$out"; echo "good lines did not all run"; exit 1; }
grep -q "^good.matvec.q4_K  *matvec q4_K " <<< "$out" || { echo "$out"; echo "the good q4_K line did not take the quantized path"; exit 1; }
echo "bad lines: 9 per-line errors, the 4 good lines ran with #wrong 0"
