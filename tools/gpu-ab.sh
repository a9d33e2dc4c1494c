#!/usr/bin/env bash
# One binary, several paths, the same model, alternated: vkrt-service's generation speed with
# each variant's extra arguments (lab knobs, --fuse, --activations ...), ROUNDS rounds
# of every variant in turn (so clocks and the neighbours' load drift over all of them alike),
# then per variant the median tg tok/s, p50 ms and × roofline, and the ratio to the first.
#   tools/gpu-ab.sh BUILDDIR MODEL.gguf 'VARIANT' ['VARIANT' ...]
# VARIANT: a label, a colon, the extra arguments ("base:" for none), e.g.
#   tools/gpu-ab.sh build-h200 /tmp/q.gguf 'base:' 'old-barrier:--lab barrier_stages=1' \
#       'unfused:--fuse none'
# A label LABEL@DIR runs DIR/bin/vkrt-service instead of BUILDDIR's (two builds compared in
# one run: 'new:' 'old@build-old:').
# ARGS: the arguments every run takes (default: one device, a 512-token prompt, 64 tokens,
# context 1024, q8_0 K/V, no verification); ROUNDS (default 3). Output: a table on stdout
# and each run's JSON line in $OUT/ab.jsonl (default OUT=/tmp/vkrt-gpu-out). The variants'
# knobs must exist in the build (a lab build for --lab).
set -u
B=${1:?usage: tools/gpu-ab.sh BUILDDIR MODEL.gguf 'LABEL:ARGS' ...}
model=${2:?usage: tools/gpu-ab.sh BUILDDIR MODEL.gguf 'LABEL:ARGS' ...}
shift 2
[ $# -ge 1 ] || { echo "tools/gpu-ab.sh: no variant given"; exit 2; }
ARGS=${ARGS:---devices 1 --prompt-tokens 512 --tokens 64 --ctx 1024 --verify 0 --kv-type q8_0}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-/tmp/vkrt-gpu-out}
mkdir -p "$OUT"
jsonl="$OUT/ab.jsonl"
: > "$jsonl"
labels=() extras=() bins=()
for v in "$@"; do
  case "$v" in *:*) ;; *) echo "tools/gpu-ab.sh: '$v' is not LABEL:ARGS"; exit 2 ;; esac
  label=${v%%:*} dir=$B
  case "$label" in *@*) dir=${label#*@} label=${label%%@*} ;; esac
  [ -x "$dir/bin/vkrt-service" ] || { echo "tools/gpu-ab.sh: no $dir/bin/vkrt-service"; exit 2; }
  labels+=("$label") extras+=("${v#*:}") bins+=("$dir/bin/vkrt-service")
done
for ((r = 1; r <= ROUNDS; r++)); do
  for i in "${!labels[@]}"; do
    # shellcheck disable=SC2086 # the arguments split into words on purpose
    out=$("${bins[$i]}" --weights "$model" $ARGS ${extras[$i]} --json 2>&1) ||
      { echo "$out" | tail -5; echo "tools/gpu-ab.sh: ${labels[$i]} (round $r) failed"; exit 1; }
    line=$(tail -1 <<< "$out")
    /usr/bin/env python3 -c "import json, sys; d = json.loads(sys.argv[1]); d['variant'] = sys.argv[2]; \
      d['round'] = int(sys.argv[3]); print(json.dumps(d))" "$line" "${labels[$i]}" "$r" >> "$jsonl" ||
      { echo "$out" | tail -5; echo "tools/gpu-ab.sh: ${labels[$i]}: no JSON summary"; exit 1; }
    echo "round $r ${labels[$i]}: $(grep -m1 '^vkrt-service: tg:' <<< "$out")" >&2
  done
done
/usr/bin/env python3 - "$jsonl" "${labels[@]}" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
labels = sys.argv[2:]
print("| variant | tg tok/s (median) | p50 ms | x roofline | pp tok/s | runs | vs %s |" % labels[0])
print("|---|---|---|---|---|---|---|")
base = None
for label in labels:
    rs = [r for r in rows if r["variant"] == label]
    tg = statistics.median(r["tg_tokens_per_s"] for r in rs)
    p50 = statistics.median(r["p50_ms"] for r in rs)
    roof = statistics.median(r["roofline_ms"] / r["p50_ms"] for r in rs if r["p50_ms"] > 0)
    pp = statistics.median(r.get("pp_tokens_per_s", 0) for r in rs)
    base = tg if base is None else base
    print("| %s | %.1f | %.3f | %.2f | %.0f | %d | %.3f |" % (label, tg, p50, roof, pp, len(rs), tg / base))
EOF
