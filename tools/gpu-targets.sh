#!/usr/bin/env bash
# Every speed target of docs/perf.md's "Where the targets stand" in one run on a GPU machine,
# and the table of them with met / not met (tools/targets_summary.py):
#   tools/gpu-targets.sh BUILDDIR        (BUILDDIR built here for the GPU's board)
# The Llama-shaped files are written first (random weights, real shapes; kept in $MODELS
# between runs). Results: $OUT/summary.txt, $OUT/log.txt and $OUT/targets.tgz (every JSON).
#   PARTS   what to run (default: tg sample pp depth attention matmul load2 cold)
#   TYPES   weight types (default: q4_K q8_0 f16); PRESETS (default: llama3-8b llama3.2-1b)
#   COLD    types loaded from a cold page cache (default: q4_K q8_0; root drops the caches)
#   SMALL=1 tiny models and contexts, to check the script itself on any device
set -u
B=${1:?builddir}/bin
OUT=${OUT:-/tmp/vkrt-targets}
MODELS=${MODELS:-/var/tmp/vkrt-targets}
PARTS=${PARTS:-tg sample pp depth attention matmul load2 cold}
TYPES=${TYPES:-q4_K q8_0 f16}
PRESETS=${PRESETS:-llama3-8b llama3.2-1b}
COLD=${COLD-q4_K q8_0}
SMALL=${SMALL:-0}
ACT_PP=q8,f16 # the prompt on cooperative matrices; a device without them: q8
[ "$SMALL" = 1 ] && ACT_PP=q8
root=$(cd "$(dirname "$0")/.." && pwd)
J=$OUT/json
mkdir -p "$OUT" "$J" "$MODELS"
log=$OUT/log.txt
step() { echo "### $* ($(date +%T))" | tee -a "$log"; }
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
# the last line of a run that is a JSON object, into $J/NAME.json (NAME: fields joined by +)
keep_json() { grep -a '^{' | tail -1 > "$J/$1.json"; }

step machine
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true; date -u; } \
  | tee "$OUT/machine.txt" >> "$log"

SVC=(--devices 1 --verify 0 --json)
for p in $PRESETS; do
  for t in $TYPES; do
    f=$MODELS/$p-$t.gguf
    if [ ! -s "$f" ]; then
      step "write $p $t"
      if [ "$SMALL" = 1 ]; then
        "$B/vkrt-service" --make-gguf "$f" --layers 2 --hidden 512 --ffn 1024 --heads 4 \
          --kv-heads 2 --vocab 1000 --dtype "$t" >> "$log" 2>&1
      else
        "$B/vkrt-service" --make-gguf "$f" --preset "$p" --dtype "$t" >> "$log" 2>&1
      fi
    fi
    kv=q8_0; [ "$t" = f16 ] && kv=f16
    if has tg; then # generation at ~96 cached tokens
      step "tg $p $t"
      timeout 120 "$B/vkrt-service" --weights "$f" "${SVC[@]}" --prompt-tokens 64 --tokens 64 \
        --ctx 512 --kv-type $kv --activations q8 2>>"$log" | keep_json "tg+$p+$t"
    fi
    if has sample && [ "$t" = q4_K ]; then # a temperature drawn on the device, and on the host
      for where in device host; do
        step "sample $p $t $where"
        timeout 120 "$B/vkrt-service" --weights "$f" "${SVC[@]}" --prompt-tokens 64 --tokens 64 \
          --ctx 512 --kv-type $kv --activations q8 --temperature 0.8 --sampler $where 2>>"$log" \
          | keep_json "sample+$p+$t+$where"
      done
    fi
    if has pp; then # a 512-token prompt, then generation at ~544
      step "pp $p $t"
      timeout 120 "$B/vkrt-service" --weights "$f" "${SVC[@]}" --prompt-tokens 512 --tokens 64 \
        --ctx 1024 --kv-type $kv --activations $ACT_PP 2>>"$log" | keep_json "pp+$p+$t"
    fi
    if has depth; then # generation at 32700 cached tokens
      d=32700 c=32768; [ "$SMALL" = 1 ] && d=900 c=1024
      for k in q8_0 f16; do
        [ "$t" = f16 ] && [ $k = q8_0 ] && continue
        step "depth $p $t kv $k"
        timeout 150 "$B/vkrt-service" --weights "$f" "${SVC[@]}" --depth $d --tokens 48 --ctx $c \
          --kv-type $k --activations $ACT_PP 2>>"$log" | keep_json "depth+$p+$t+$k"
      done
    fi
    if has load2 && [ "$p" = llama3-8b ]; then # the warm load into two devices (one GPU's)
      step "load2 $p $t"
      timeout 120 "$B/vkrt-service" --weights "$f" --devices 2 --verify 0 --json --prompt-tokens 1 \
        --tokens 2 --warmup-ms 0 2>>"$log" | keep_json "load2+$p+$t"
    fi
  done
done

if has attention; then
  step "attention cases"
  cases=$root/tools/bench/cases/attention.txt; [ "$SMALL" = 1 ] && cases=$root/tools/bench/cases/attention-short.txt
  timeout 180 "$B/vkrt-bench" cases --test-file "$cases" --json 2>>"$log" | keep_json cases+attention
fi
if has matmul; then
  step "matmul cases"
  cases=$root/tools/bench/cases/prompt.txt; [ "$SMALL" = 1 ] && cases=$root/tools/bench/cases/small.txt
  timeout 240 "$B/vkrt-bench" cases --test-file "$cases" --activations f16 --json 2>>"$log" \
    | keep_json cases+matmul
fi
if has cold; then
  for t in $COLD; do
    for p in $PRESETS; do
      f=$MODELS/$p-$t.gguf
      [ -s "$f" ] || continue
      step "cold $p $t"
      if sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
        timeout 180 "$B/vkrt-service" --weights "$f" "${SVC[@]}" --prompt-tokens 1 --tokens 2 \
          --warmup-ms 0 2>>"$log" | keep_json "cold+$p+$t"
        # the disk's sequential rate over the same file, one thread, O_DIRECT
        dd if="$f" of=/dev/null bs=16M iflag=direct 2>&1 | tail -1 | tee -a "$log" \
          | python3 -c 'import json,re,sys; l=sys.stdin.read(); m=re.search(r"(\d+) bytes.*?([\d.]+) s,", l); print(json.dumps({"bytes": int(m.group(1)), "seconds": float(m.group(2))}) if m else "{}")' \
          > "$J/dd+$p+$t.json"
      else
        echo "cold: cannot drop the page cache (not root): skipped" | tee -a "$log"
      fi
      break # one preset a type: the largest file of the type
    done
  done
fi

step summary
python3 "$root/tools/targets_summary.py" "$J" | tee "$OUT/summary.txt"
(cd "$OUT" && tar czf targets.tgz json machine.txt)
