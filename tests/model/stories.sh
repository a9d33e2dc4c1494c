#!/usr/bin/env bash
# vkrt-service runs a real llama model, tests/data/stories260K.gguf (5 layers, GQA 8/4 heads,
# 512-token vocabulary): 200 greedy tokens from BOS on 1, 2 and 4 devices (the simulated board
# opens as many VkDevices as asked) give the same ids, each run checked position by position
# against the float64 reference (teacher-forced), every rank bit-identical; the text is the
# story the model was trained on (" Once upon a time", English words). A prompt made of the
# first generated sentence tokenizes to the ids the model generated for it and continues as
# the run from BOS did. Recording every token's work instead of launching a captured graph
# gives the same ids, also when capturing fails (the service falls back to it), and so does
# every path of the weights' load; seeded sampling repeats itself. A 40-token prompt run in
# ubatches (one, or three of up to 16, the last partial) on 1 and 2 devices continues with the
# ids of the prompt fed token by token, verified at every position. Bad model files (another
# architecture, a missing tensor, a shape that
# disagrees with the metadata, no BOS) exit 3 with a message naming the cause; a model the
# devices cannot split (4 KV heads on 3 devices) or a q8_0 K/V cache with 8-wide heads exit 5.
# --hidden/--layers/--ffn that disagree with the model exit 3 naming the flag (a value that
# agrees runs); --make-gguf's own options with --weights exit 2 naming the option.
# --profile names each op of one token with its count (or is refused without the lab).
. "$(dirname "$0")/lib.sh"
require_llama
model="$root/tests/data/stories260K.gguf"
echo "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d  $model" | sha256sum -c --quiet
work=$(mktemp -d /tmp/vkrt-model.XXXXXX)
trap 'rm -rf "$work"' EXIT

field() { sed -n "s/^$1: //p" <<< "$2"; }
ids_ref=""
for devices in 1 2 4; do
  out=$("$svc" --weights "$model" --tokens 200 --print-ids --devices $devices --warmup-ms 0 --json 2>&1) ||
    { echo "$out"; echo "stories260K on $devices devices failed"; exit 1; }
  grep -q "greedy choice the same at every position: passed; .* ranks bit-identical: yes ($devices ranks)" <<< "$out" ||
    { echo "$out"; echo "stories260K on $devices devices: not verified"; exit 1; }
  grep -q "verified 200 positions against float64" <<< "$out" || { echo "$out"; echo "not 200 positions checked"; exit 1; }
  tail -1 <<< "$out" | /usr/bin/python3 -c "import json, sys; d = json.load(sys.stdin); \
    sys.exit(not (d['verified'] and d['ranks_bit_identical'] and d['ranks'] == $devices and \
                  d['generated_tokens'] == 200 and d['checked_positions'] == 200))" ||
    { echo "$out"; echo "--json: not the summary's facts"; exit 1; }
  ids=$(field ids "$out")
  [ "$(tr ',' '\n' <<< "$ids" | wc -l)" -eq 200 ] || { echo "$out"; echo "not 200 ids"; exit 1; }
  [ "$(field "prompt ids" "$out")" = 1 ] || { echo "$out"; echo "generation did not start from BOS alone"; exit 1; }
  if [ -z "$ids_ref" ]; then
    ids_ref=$ids
    text=$(sed -n '/^text: /,/^prompt ids: /p' <<< "$out" | sed '$d' | sed '1s/^text: //')
  elif [ "$ids" != "$ids_ref" ]; then
    echo "ids on $devices devices: $ids"; echo "ids on 1 device: $ids_ref"; exit 1
  fi
  echo "$devices devices: $(grep -m1 '^vkrt-service: tg:' <<< "$out")"
  echo "$devices devices: $(grep -m1 "^vkrt-service: a token's work" <<< "$out")"
  echo "$devices devices: $(grep -m1 '^vkrt-service: verified' <<< "$out")"
done
# A token's work recorded every time instead of launched as a captured graph: the same ids.
out=$("$svc" --weights "$model" --tokens 200 --print-ids --devices 2 --warmup-ms 0 --graph off 2>&1) ||
  { echo "$out"; echo "stories260K with --graph off failed"; exit 1; }
grep -q "^vkrt-service: a token's work: recorded per token (--graph off)" <<< "$out" &&
  grep -q "greedy choice the same at every position: passed; .* ranks bit-identical: yes (2 ranks)" <<< "$out" &&
  [ "$(field ids "$out")" = "$ids_ref" ] || { echo "$out"; echo "--graph off: not the same ids"; exit 1; }
echo "2 devices, --graph off: the same 200 ids"
# A capture that fails (one already open refuses the token's): the reason logged, every
# token's work recorded instead, the same ids.
out=$("$svc" --weights "$model" --tokens 200 --print-ids --devices 2 --warmup-ms 0 --fault capture-fails 2>&1) ||
  { echo "$out"; echo "stories260K with a failing capture failed"; exit 1; }
grep -q "^vkrt-service: capturing a token failed; recording every token's work instead (capturing it failed: vkrt_graph_begin: VKRT_ERROR_INVALID_ARGUMENT: .*already under way" <<< "$out" &&
  grep -q "^vkrt-service: a token's work: recorded per token (capturing it failed" <<< "$out" &&
  grep -q "greedy choice the same at every position: passed; .* ranks bit-identical: yes (2 ranks)" <<< "$out" &&
  [ "$(field ids "$out")" = "$ids_ref" ] || { echo "$out"; echo "failing capture: no fallback to recording, or not the same ids"; exit 1; }
echo "2 devices, capture failing: recorded per token, the same 200 ids"
# --profile (a build with the lab): one more token timed op by op on device 0, each op of the
# forward pass under its name as many times as the model has it (5 layers, q/k/v and gate/up
# each one op on weights of one type, the f32 products taking the norms before them and the
# swiglu after gate/up in their dispatch; with vkrt_op_rope_set_rows in the build q roped alone
# and k roped into its cache row, else q and k roped in one; 2 allreduces per
# layer and the logits' on 2 devices), the counts adding up to the ops timed, --json's line
# still last; without the lab it is refused with exit 2.
out=$("$svc" --weights "$model" --tokens 8 --devices 2 --warmup-ms 0 --verify 0 --profile --json 2>&1) && rc=0 || rc=$?
if grep -q "^#define CONFIG_VKRT_LAB 1" "$builddir/include/vkrt/config.h"; then
  [ $rc -eq 0 ] || { echo "$out"; echo "--profile failed"; exit 1; }
  if grep -q "^vkrt-service: --profile: VKRT_ERROR_UNSUPPORTED" <<< "$out"; then
    echo "2 devices, --profile: no timestamps on this device (said so)"
  else
    count() { sed -n "s/^vkrt-service: profile: $1  *\([0-9][0-9]*\) .*/\1/p" <<< "$out"; }
    if grep -q "^#define CONFIG_VKRT_KERNEL_ROPE_SET_ROWS 1" "$builddir/include/vkrt/config.h"; then
      rope_ops=("rope q 5" "K cache row (roped) 5")
    else
      rope_ops=("rope q k 5" "K cache row 5")
    fi
    for want in "token_embd 1" "attn_norm + attn_qkv 5" "${rope_ops[@]}" "attention 5" \
                "attn_output + residual 5" "allreduce 11" "ffn_norm + ffn_gate_up + swiglu 5" \
                "ffn_down + residual 5" "output_norm + output 1" "argmax 1"; do
      [ "$(count "${want% *}")" = "${want##* }" ] ||
        { echo "$out"; echo "--profile: not '${want% *}' ${want##* } times"; exit 1; }
    done
    ops=$(sed -n 's/^vkrt-service: profile: one token .*: \([0-9]*\) ops, .*/\1/p' <<< "$out")
    sum=$(sed -n 's/^vkrt-service: profile: [A-Za-z].* \([0-9][0-9]*\)  *[0-9.]*  *[0-9.]*  *[0-9.]*%$/\1/p' <<< "$out" | awk '{ s += $1 } END { print s }')
    [ -n "$ops" ] && [ "$ops" = "$sum" ] || { echo "$out"; echo "--profile: $ops ops, the rows count $sum"; exit 1; }
    tail -1 <<< "$out" | /usr/bin/python3 -c "import json, sys; json.load(sys.stdin)" ||
      { echo "$out"; echo "--profile --json: the JSON summary is not the last line"; exit 1; }
    echo "2 devices, --profile: $ops ops by name, $(grep -m1 '^vkrt-service: profile: one token' <<< "$out" | sed 's/.*sum to //')"
  fi
else
  [ $rc -eq 2 ] && grep -q "needs a build with the lab" <<< "$out" ||
    { echo "$out"; echo "--profile without the lab: not refused (exit $rc)"; exit 1; }
  echo "--profile: refused without the lab"
fi
# --lab barrier_stages=1 (the barrier that waits for compute and transfer always): the same
# ids, verified, ranks bit-identical; without the lab refused with exit 2.
first60=$(tr ',' '\n' <<< "$ids_ref" | head -60 | paste -sd,)
for extra in "--lab barrier_stages=1"; do
  out=$("$svc" --weights "$model" --tokens 60 --print-ids --devices 2 --warmup-ms 0 $extra 2>&1) && rc=0 || rc=$?
  if grep -q "^#define CONFIG_VKRT_LAB 1" "$builddir/include/vkrt/config.h"; then
    [ $rc -eq 0 ] && grep -q "greedy choice the same at every position: passed; .* ranks bit-identical: yes (2 ranks)" <<< "$out" &&
      [ "$(field ids "$out")" = "$first60" ] || { echo "$out"; echo "$extra: not the same 60 ids, verified"; exit 1; }
    echo "2 devices, $extra: the same 60 ids"
  else
    [ $rc -eq 2 ] && grep -q "needs a build with the lab" <<< "$out" ||
      { echo "$out"; echo "$extra without the lab: not refused (exit $rc)"; exit 1; }
    echo "$extra: refused without the lab"
  fi
done
# --stream: each token's text on stderr as it is chosen, the same text as stdout's line.
streamed=$("$svc" --weights "$model" --tokens 40 --devices 1 --warmup-ms 0 --verify 0 --stream 2>&1 >"$work/stream.out") ||
  { echo "$streamed"; echo "--stream failed"; exit 1; }
[ "$(tail -1 <<< "$streamed")" = "$(sed -n 's/^text: //p' "$work/stream.out")" ] ||
  { echo "stderr: $streamed"; cat "$work/stream.out"; echo "--stream: not the text of the run"; exit 1; }
echo "--stream: the 40 tokens' text as they came"
# Every load path (pinned chunks read by pread, O_DIRECT or memcpy; the mapped path): the
# same ids, the path named, and the load's rate, its ratios to the pinned upload (dev0, and
# both devices at once) and the time to the first token in the JSON.
first40=$(tr ',' '\n' <<< "$ids_ref" | head -40 | paste -sd,)
for path in read direct memcpy mapped; do
  out=$("$svc" --weights "$model" --tokens 40 --print-ids --devices 2 --warmup-ms 0 --verify 40 \
        --load-path $path --json 2>&1) || { echo "$out"; echo "--load-path $path failed"; exit 1; }
  took=$path
  [ $path = direct ] && grep -q "weights via read: .*O_DIRECT" <<< "$out" && took=read # no O_DIRECT here
  [ "$(field ids "$out")" = "$first40" ] && grep -q "dev1 weights via $took: " <<< "$out" &&
    grep -q "greedy choice the same at every position: passed" <<< "$out" &&
    grep -q "^vkrt-service: time to first token: .* s from process start: " <<< "$out" ||
    { echo "$out"; echo "--load-path $path: not the same ids, or the path or the first token not said"; exit 1; }
  [ $took = mapped ] || grep -q "^vkrt-service: load structure: " <<< "$out" ||
    { echo "$out"; echo "--load-path $path: no load structure line"; exit 1; }
  tail -1 <<< "$out" | /usr/bin/python3 -c "import json, sys; d = json.load(sys.stdin); \
    sys.exit(not (d['load_gbps'] > 0 and d['pinned_h2d_gbps'] > 0 and d['ttft_s'] > 0 and \
                  abs(d['load_vs_pinned'] - d['load_gbps'] / d['pinned_h2d_gbps']) < 1e-2 and \
                  d['pinned_all_devices_gbps'] > 0 and \
                  abs(d['load_vs_pinned_all'] - d['load_gbps'] / d['pinned_all_devices_gbps']) < 1e-2 and \
                  d['load_path'] == '$took'))" ||
    { echo "$out"; echo "--load-path $path: --json lacks the load's facts"; exit 1; }
  echo "2 devices, --load-path $path: the same 40 ids; $(grep -m1 '^vkrt-service: loaded' <<< "$out")"
done

# Sampling (temperature, top-k, top-p): the device's 40 best logits of each token
# (vkrt_op_top_k), the host's draw among them; seeded, so two runs agree; the same ids as the
# host's sampler on the whole downloaded row (--sampler host), the prompt run in one ubatch
# or token by token; another story than the greedy one; the float64 check still holds the
# devices' argmax.
sample=(--weights "$model" --tokens 60 --print-ids --devices 2 --warmup-ms 0 --temperature 0.9 --top-k 40 --top-p 0.95)
out=$("$svc" "${sample[@]}" --seed 7 2>&1) && again=$("$svc" "${sample[@]}" --seed 7 2>&1) &&
  host=$("$svc" "${sample[@]}" --seed 7 --sampler host 2>&1) &&
  pk=$("$svc" "${sample[@]}" --seed 7 --prompt "Once upon a time" 2>&1) &&
  ph=$("$svc" "${sample[@]}" --seed 7 --prompt "Once upon a time" --prompt-mode token --sampler host 2>&1) ||
  { echo "$out"; echo "sampling failed"; exit 1; }
topk_path="to the next id (sampled on the host: temperature 0.9, top-k 40" # a build without the kernel
grep -q "^#define CONFIG_VKRT_KERNEL_TOP_K 1" "$builddir/include/vkrt/config.h" &&
  topk_path="to the next id (the device's top-k 40 candidates (vkrt_op_top_k), drawn on the host"
grep -q "greedy choice the same at every position: passed" <<< "$out" &&
  grep -qF "$topk_path" <<< "$out" &&
  grep -q "to the next id (sampled on the host: temperature 0.9, top-k 40" <<< "$host" &&
  grep -q "ranks bit-identical: yes" <<< "$out" ||
  { echo "$out"; echo "$host"; echo "top-k sampling: the path, the float64 check or the ranks"; exit 1; }
greedy60=$(tr ',' '\n' <<< "$ids_ref" | head -60 | paste -sd,)
[ "$(field ids "$out")" = "$(field ids "$again")" ] && [ "$(field ids "$out")" != "$greedy60" ] &&
  [ "$(field ids "$out")" = "$(field ids "$host")" ] && [ "$(field ids "$pk")" = "$(field ids "$ph")" ] ||
  { echo "$out"; echo "$again"; echo "$host"; echo "$pk"; echo "$ph"
    echo "sampling: seeded runs differ, the device's candidates drew other ids than the host's sampler, or the greedy story came out"; exit 1; }
echo "sampled (seed 7, temperature 0.9, top-k 40, top-p 0.95; the device's candidates and the host's sampler the same ids):$(sed -n 's/^text: //p' <<< "$out" | head -c 100)..."

# A temperature alone is drawn on the device (vkrt_op_sample): seeded runs agree, the summary
# says where the draw ran, no logits come to the host for it, and another seed draws another
# story; the host's sampler (--sampler host) is the path for the same temperature there.
dsample=(--weights "$model" --tokens 60 --print-ids --devices 2 --warmup-ms 0 --temperature 0.9 --verify 4)
out=$("$svc" "${dsample[@]}" --seed 7 2>&1) && again=$("$svc" "${dsample[@]}" --seed 7 2>&1) &&
  other=$("$svc" "${dsample[@]}" --seed 8 2>&1) && host=$("$svc" "${dsample[@]}" --seed 7 --sampler host 2>&1) ||
  { echo "$out"; echo "device sampling failed"; exit 1; }
grep -q "to the next id (drawn on the device: temperature 0.9 (vkrt_op_sample))" <<< "$out" &&
  grep -q "to the next id (sampled on the host: temperature 0.9" <<< "$host" &&
  grep -q "greedy choice the same at every position: passed" <<< "$out" &&
  grep -q "ranks bit-identical: yes" <<< "$out" ||
  { echo "$out"; echo "$host"; echo "device sampling: the path, the float64 check or the ranks"; exit 1; }
[ "$(field ids "$out")" = "$(field ids "$again")" ] && [ "$(field ids "$out")" != "$(field ids "$other")" ] &&
  [ "$(field ids "$out")" != "$greedy60" ] ||
  { echo "$out"; echo "$again"; echo "$other"; echo "device sampling: seeded runs differ, seeds agree, or the greedy story"; exit 1; }
echo "drawn on the device (seed 7, temperature 0.9):$(sed -n 's/^text: //p' <<< "$out" | head -c 100)..."

# The text: the trained story, in English (most words from a small list of common ones or
# plain lower-case words, nothing but printable ASCII).
[[ "$text" == " Once upon a time"* ]] || { echo "text: $text"; echo "does not start ' Once upon a time'"; exit 1; }
LC_ALL=C grep -q '[^[:print:][:space:]]' <<< "$text" && { echo "text: $text"; echo "non-printable bytes"; exit 1; }
words=$(tr -s '[:space:][:punct:]' '\n' <<< "$text" | grep -c . || true)
plain=$(tr -s '[:space:][:punct:]' '\n' <<< "$text" | grep -cE '^[A-Za-z]+$' || true)
common=$(tr -s '[:space:][:punct:]' '\n' <<< "$text" | grep -ciwE 'the|a|and|to|was|she|he|her|his|it|they|of|in|with|said|day|play|little|big|happy' || true)
[ "$words" -ge 100 ] && [ $((plain * 100)) -ge $((words * 95)) ] && [ $((common * 100)) -ge $((words * 20)) ] ||
  { echo "text: $text"; echo "not readable English: $words words, $plain alphabetic, $common common"; exit 1; }
echo "text (1 device):$(head -c 120 <<< "$text" | tr '\n' ' ')..."

# The tokenizer: the first 12 generated tokens as a prompt tokenize to BOS and those ids, and
# the continuation is the one the run from BOS generated after them.
out=$("$svc" --weights "$model" --tokens 12 --print-ids --devices 1 --warmup-ms 0 2>&1) || { echo "$out"; exit 1; }
first=$(field ids "$out")
prompt=$(sed -n '/^text: /,/^prompt ids: /p' <<< "$out" | sed '$d' | sed '1s/^text:  //')
out=$("$svc" --weights "$model" --prompt "$prompt" --tokens 20 --print-ids --devices 2 --warmup-ms 0 2>&1) ||
  { echo "$out"; echo "prompt run failed"; exit 1; }
[ "$(field "prompt ids" "$out")" = "1,$first" ] ||
  { echo "$out"; echo "prompt '$prompt': ids $(field "prompt ids" "$out"), the model generated 1,$first"; exit 1; }
want=$(tr ',' '\n' <<< "$ids_ref" | sed -n '13,32p' | paste -sd,)
[ "$(field ids "$out")" = "$want" ] || { echo "$out"; echo "continuation differs from the run from BOS: want $want"; exit 1; }
grep -q "greedy choice the same at every position: passed" <<< "$out" || { echo "$out"; exit 1; }
echo "prompt '$prompt': ids 1,$first (as generated); continuation as from BOS; $(grep -m1 '^vkrt-service: pp:' <<< "$out")"

# The prompt pass: a 40-token prompt run in ubatches (one of 40; three of up to 16, the last
# partial; on 1 and 2 devices) continues with the ids of the prompt fed token by token, and
# every position, prompt rows included, passes the float64 check with bit-identical ranks.
# With --verify 5 the checked positions are a ubatch of their own (5, 16, 16, 3 tokens).
pp=(--weights "$model" --prompt-tokens 40 --seed 11 --tokens 16 --print-ids --warmup-ms 0 --json)
tok=$("$svc" "${pp[@]}" --prompt-mode token --devices 1 2>&1) || { echo "$tok"; echo "--prompt-mode token failed"; exit 1; }
grep -q "^vkrt-service: pp: 40 prompt tokens in .* (prompt mode token: one token at a time)" <<< "$tok" ||
  { echo "$tok"; echo "--prompt-mode token: not token by token"; exit 1; }
for run in "1 512 55 1 ubatch of up to 40" "2 512 55 1 ubatch of up to 40" "1 16 5 4 ubatches of up to 16" "2 16 55 3 ubatches of up to 16"; do
  read -r devices ubatch checked how <<< "$run"
  out=$("$svc" "${pp[@]}" --devices "$devices" --ubatch "$ubatch" --verify "$checked" 2>&1) ||
    { echo "$out"; echo "the prompt pass on $devices devices (--ubatch $ubatch) failed"; exit 1; }
  grep -q "^vkrt-service: pp: 40 prompt tokens in .* (prompt mode batch: $how tokens)" <<< "$out" &&
    grep -q "verified $checked positions against float64 (teacher-forced): greedy choice the same at every position: passed; .* ranks bit-identical: yes ($devices ranks)" <<< "$out" &&
    [ "$(field "prompt ids" "$out")" = "$(field "prompt ids" "$tok")" ] && [ "$(field ids "$out")" = "$(field ids "$tok")" ] &&
    /usr/bin/python3 -c "import json,sys; d=json.loads(sys.argv[1]); sys.exit(not (d['prompt_mode'] == 'batch' and d['ubatch'] == min($ubatch, 40) and d['prompt_tokens'] == 40 and d['checked_positions'] == $checked and d['verified']))" "$(grep '^{' <<< "$out")" ||
    { echo "$out"; echo "token by token: $(field ids "$tok")"; echo "the prompt pass on $devices devices (--ubatch $ubatch): not the ids of token by token, or not verified"; exit 1; }
  echo "$devices devices, --ubatch $ubatch: $(grep -m1 '^vkrt-service: pp:' <<< "$out"); the ids of token by token; $checked positions verified"
done
echo "token by token: $(grep -m1 '^vkrt-service: pp:' <<< "$tok")"

# Bad model files: a byte patch of stories260K each, exit 3 and the cause named.
patch() { # out key old new: replaces old by new (same length) in the 40 bytes after key
  /usr/bin/python3 - "$model" "$1" "$2" "$3" "$4" <<'PY'
import sys
src, dst, key, old, new = sys.argv[1:]
d = bytearray(open(src, 'rb').read())
k = d.index(key.encode()) + len(key)
i = d.index(bytes.fromhex(old), k, k + 40)
d[i:i + len(bytes.fromhex(old))] = bytes.fromhex(new)
open(dst, 'wb').write(d)
PY
}
expect() { # rc message file args...
  local want=$1 msg=$2 file=$3 rc=0; shift 3
  out=$("$svc" --weights "$file" --tokens 4 --warmup-ms 0 "$@" 2>&1) || rc=$?
  [ $rc -eq "$want" ] && grep -qF -- "$msg" <<< "$out" ||
    { echo "$out"; echo "$(basename "$file") $*: exit $rc, want $want and '$msg'"; exit 1; }
  echo "$(basename "$file") $*: exit $rc: $(grep -m1 -F -- "$msg" <<< "$out")"
}
patch "$work/mamba.gguf" general.architecture 6c6c616d61 6d616d6261 # "llama" -> "mamba"
expect 3 'general.architecture is "mamba"' "$work/mamba.gguf"
sed 's/blk\.2\.attn_k\.weight/blk.2.attn_K.weight/' "$model" > "$work/no-attn-k.gguf"
expect 3 "missing tensor blk.2.attn_k.weight" "$work/no-attn-k.gguf"
patch "$work/ffn176.gguf" llama.feed_forward_length 04000000ac000000 04000000b0000000 # u32 172 -> 176
expect 3 "tensor blk.0.ffn_gate.weight has shape {64, 172, 1, 1}, the metadata says {64, 176}" "$work/ffn176.gguf"
sed 's/tokenizer\.ggml\.bos_token_id/tokenizer.ggml.bos_token_XX/' "$model" > "$work/no-bos.gguf"
expect 3 "tokenizer.ggml.bos_token_id" "$work/no-bos.gguf"
expect 5 "llama.attention.head_count_kv = 4 does not divide among 3 devices" "$model" --devices 3
expect 5 "a q8_0 K/V cache needs a head size that is a multiple of 32; this model's is 8" "$model" --kv-type q8_0
expect 2 "bad or incomplete argument '--prompt-mode fast'" "$model" --prompt-mode fast
expect 2 "bad or incomplete argument '--ubatch 0'" "$model" --ubatch 0
# --activations f16 (VKRT_MATMUL_ACTIVATIONS_F16: the prompt's tiled matmuls on cooperative
# matrices): run where every device takes it (vkrt-probe's matmul lines say so), else refused
# with exit 5 naming the device (lavapipe has none) or the build without the kernels.
grep -qF -- "--activations f32|q8|f16|q8,f16" <<< "$("$svc" --help)" || { "$svc" --help; echo "--help lacks --activations f16"; exit 1; }
plans=$("$builddir/bin/vkrt-probe" --activations f16 2>&1 | grep " matmul: ") || { echo "$plans"; echo "vkrt-probe --activations f16: no matmul lines"; exit 1; }
if ! grep -q "^#define CONFIG_VKRT_KERNEL_MATMUL_COOPMAT 1" "$builddir/include/vkrt/config.h"; then
  expect 5 "--activations f16: this build has no cooperative-matrix matmul kernels" "$model" --activations f16
elif grep -qv "cooperative matrix: x and w rounded to f16" <<< "$plans"; then
  dev=$(grep -v -m1 "cooperative matrix: x and w rounded to f16" <<< "$plans" | sed -n 's/.*\(dev[0-9]*\) matmul:.*/\1/p')
  expect 5 "--activations f16: $dev (" "$model" --activations f16
  expect 5 "has no cooperative matrices (VK_NV_cooperative_matrix with 32-wide subgroups)" "$model" --activations q8,f16
else
  expect 0 '"matmul_activations": "f16"' "$model" --activations f16 --prompt-tokens 40 --verify 0 --json
fi
expect 2 "bad or incomplete argument '--activations f8'" "$model" --activations f8

# Speed-run inputs: --prompt-tokens (BOS + seeded draws) and --depth (the first token at
# position D over constant K/V rows): 1 and 2 devices agree at depth, the rows are read (the
# ids differ from the same prompt at depth 0), nothing claims a float64 check.
depth=(--weights "$model" --prompt-tokens 16 --seed 5 --tokens 24 --print-ids --warmup-ms 0 --json)
d1=$("$svc" "${depth[@]}" --depth 300 --devices 1 2>&1) && d2=$("$svc" "${depth[@]}" --depth 300 --devices 2 2>&1) &&
  d0=$("$svc" "${depth[@]}" --verify 0 --devices 1 2>&1) || { echo "$d1$d2$d0"; echo "--depth run failed"; exit 1; }
[ "$(field ids "$d1")" = "$(field ids "$d2")" ] && [ "$(field ids "$d1")" != "$(field ids "$d0")" ] &&
  [ "$(field "prompt ids" "$d1")" = "$(field "prompt ids" "$d0")" ] &&
  [ "$(tr ',' '\n' <<< "$(field "prompt ids" "$d1")" | wc -l)" -eq 16 ] &&
  grep -q "not verified against float64 (--depth" <<< "$d2" &&
  /usr/bin/python3 -c "import json,sys; d=json.loads(sys.argv[1]); sys.exit(not (d['depth'] == 300 and d['prompt_tokens'] == 16 and d['ranks_bit_identical'] and d['checked_positions'] == 0))" "$(grep '^{' <<< "$d2")" ||
  { echo "$d1"; echo "$d2"; echo "$d0"; echo "--depth 300: 1 and 2 devices differ, or depth 0 gave the same ids"; exit 1; }
echo "--depth 300 --prompt-tokens 16: 1 and 2 devices the same ids, not those of depth 0"
expect 2 "nothing can be checked against float64" "$model" --depth 8 --verify 3
# --time-without: the ops named so are left out of every record (each layer's attention and
# ffn_down in the prompt's and the token's records: counted), a prefix no op has leaves none
# out; nothing is checked against float64, and the profile does not run beside it.
tw=$("$svc" --weights "$model" --tokens 8 --warmup-ms 0 --time-without attention,ffn_down --json 2>&1) &&
  n=$(sed -n 's/.*--time-without attention,ffn_down: \([0-9]*\) records of device 0.s ops left out.*/\1/p' <<< "$tw") &&
  [ -n "$n" ] && [ "$n" -ge 10 ] && [ $((n % 10)) -eq 0 ] &&
  grep -q "not verified against float64 (--time-without: ops left out)" <<< "$tw" &&
  grep -q "\"ops_left_out\": $n," <<< "$tw" ||
  { echo "$tw"; echo "--time-without attention,ffn_down: no records left out, or a check claimed"; exit 1; }
echo "--time-without attention,ffn_down: $n records left out"
expect 0 "--time-without rotary: 0 records of device 0's ops left out" "$model" --time-without rotary
expect 2 "--time-without leaves ops out, so the tokens are wrong" "$model" --time-without attention --verify 3
expect 2 "--time-without and --profile: one at a time" "$model" --time-without attention --profile
expect 2 "depth 1000 + 1 prompt tokens + 4 generated need a context of 1004 tokens; --ctx 512" "$model" --depth 1000 --ctx 512
# Shape flags check the model's shapes (5 layers, hidden 64, ffn 172), never silently ignored.
expect 3 "has layers 5 hidden 64 ffn 172, but --hidden 128 was given" "$model" --hidden 128
expect 3 "but --layers 2 was given" "$model" --layers 2
expect 3 "but --ffn 64 was given" "$model" --ffn 64
expect 0 "greedy choice the same at every position: passed" "$model" --hidden 64 --layers 5 --ffn 172
expect 2 "--heads describes a file --make-gguf writes; with --weights the file has its own" "$model" --heads 4
