#!/usr/bin/env bash
# Weights to the GPU at the machine's rate (docs/perf.md "Loading weights from a file"), on the
# GPU machine, as root (for the cold rows):
#   tools/gpu-load.sh build-h200     (one table: $OUT/load.md; JSON: load.jsonl; log load-log.txt)
# (build-h200: make O=build-h200 nvidia-h200-x1_defconfig lab.config; the lab gives the bench
# and the service their load knobs, which a build without it skips with a message.)
# Makes the Llama-3-8B-shaped f16 / q8_0 / q4_K files once (vkrt-service --make-gguf --preset
# llama3-8b; kept in $LOAD_DIR for later runs), then measures, in this one run:
#   - the disk: one-thread sequential O_DIRECT read (dd iflag=direct bs=16M) of the q4_K file;
#   - vkrt-bench upload --file on the q4_K file, page cache warm, one device: the pinned
#     host-to-device rate (4 KiB and huge pages, and while the readers' preads run), the host
#     copy alone (page cache to memory, no DMA), and the read / memcpy paths under the board's
#     knobs and $SWEEP's (threads, chunk size and count, block size): which side holds a load
#     back; then 2 devices split by rows and by columns (narrow rows packed by the readers as
#     they read; with the lab also once each chunk is read, --pack-after-read, and again);
#   - per file, for 1 and 2 devices: vkrt-service's load warm (the page cache holds the file)
#     and cold (sync; echo 3 > /proc/sys/vm/drop_caches), its ratio to the pinned rate the
#     service measured at start and to the disk, and the time from process start to the first
#     generated token (--warmup-ms 0, --verify 0) against the target 1.2 x bytes / disk + 1 s;
#     warm, the sweep's best knobs too where they beat the board's by 5 % or more.
# TYPES, DEVICES and CACHES pick a subset (defaults "f16 q8_0 q4_K", "1 2", "warm cold");
# SWEEP="" skips the knob rows; PRESET and MAKE_ARGS another model (a small one tries the
# script out on lavapipe). 2.5 minutes on one H200 with the files made in the run.
set -u
B=${1:?usage: tools/gpu-load.sh BUILDDIR}/bin
OUT=${OUT:-/tmp/vkrt-gpu-out}
D=${LOAD_DIR:-/var/tmp/vkrt-load}
TYPES=${TYPES:-f16 q8_0 q4_K} DEVICES=${DEVICES:-1 2} CACHES=${CACHES:-warm cold}
PRESET=${PRESET:-llama3-8b} MAKE_ARGS=${MAKE_ARGS:-}
# threads,chunk,chunks,block per row (0: the board's)
SWEEP=${SWEEP-"8,0,0,0 4,0,0,0 0,8M,8,1M 0,4M,8,1M 0,2M,16,512K 0,64M,8,0 0,128M,4,16M"}
mkdir -p "$OUT" "$D"
log="$OUT/load-log.txt" jsonl="$OUT/load.jsonl" bench="$OUT/load-bench.txt"
: > "$log"; : > "$jsonl"; : > "$bench"
step() { echo "== $* ($(date +%T))" | tee -a "$log"; }
can_drop=0
[ -w /proc/sys/vm/drop_caches ] && can_drop=1
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
lab=0
grep -q -- "--threads" <<< "$("$B/vkrt-bench" upload --help 2>&1)" && lab=1

# Reads a file through the page cache with 8 readers unless fincore says it is all there.
warm() {
  local f=$1 size blocks i
  if command -v fincore > /dev/null; then
    local res
    res=$(fincore --bytes --noheadings --output RES "$f" 2>/dev/null)
    [ -n "$res" ] && [ "$res" -ge $(( $(stat -c %s "$f") * 95 / 100 )) ] && return
  fi
  size=$(stat -c %s "$f"); blocks=$(( (size + (16 << 20) - 1) >> 24 ))
  for i in 0 1 2 3 4 5 6 7; do
    dd if="$f" of=/dev/null bs=16M skip=$((blocks * i / 8)) count=$((blocks * (i + 1) / 8 - blocks * i / 8)) status=none &
  done
  wait
}

step files
made=0
for t in $TYPES; do
  f="$D/$PRESET-$t.gguf"
  [ -s "$f" ] && continue
  t0=$SECONDS
  # shellcheck disable=SC2086
  "$B/vkrt-service" --make-gguf "$f.part" --preset "$PRESET" --dtype "$t" $MAKE_ARGS >> "$log" 2>&1 &&
    mv "$f.part" "$f" || { echo "making $f failed" | tee -a "$log"; exit 1; }
  echo "  made $f in $((SECONDS - t0)) s" | tee -a "$log"
  made=1
done
[ $made = 1 ] && { step sync; sync; }
ls -l "$D" >> "$log"

# The smallest file made serves the disk and the bench.
fb="$D/$PRESET-q4_K.gguf"; [ -s "$fb" ] || fb="$D/$PRESET-${TYPES%% *}.gguf"
step disk
t0=$(date +%s.%N)
dd if="$fb" of=/dev/null bs=16M iflag=direct status=none
t1=$(date +%s.%N)
disk=$(awk -v b="$(stat -c %s "$fb")" -v a="$t0" -v z="$t1" 'BEGIN { printf "%.3f", b / (z - a) / 1e9 }')
echo "  dd if=$fb iflag=direct bs=16M: $disk GB/s" | tee -a "$log"
"$B/vkrt-probe" 2>&1 | grep "file loads" | sed 's/^/  /' >> "$log"

# The bench: the board's knobs, then each of $SWEEP's; the best read row's knobs go to the
# service below when they beat the board's by 5 % or more.
step bench
warm "$fb"
best_knobs="" best_rate=0 board_rate=0
brow() { # knobs (or "board") then bench options
  local k=$1 r; shift
  echo "-- knobs $k" >> "$bench"
  timeout 60 "$B/vkrt-bench" upload --file "$fb" --no-progress --no-disk "$@" >> "$bench.row" 2>&1
  cat "$bench.row" >> "$bench"
  r=$(grep -E "^  read +warm" "$bench.row" | head -1 | sed -E 's/.*: +([0-9.]+) GB\/s.*/\1/')
  rm -f "$bench.row"
  echo "  knobs $k: read $r GB/s" | tee -a "$log"
  echo "${r:-0}"
}
board_rate=$(brow board --devices 1 --path read,memcpy --iters 2 | tail -1)
grep -E "^vkrt-bench|each load|threads, " "$bench" | head -4 | sed 's/^/  /' >> "$log"
if [ $lab = 1 ]; then
  for k in $SWEEP; do
    IFS=, read -r th ch cn bl <<< "$k"
    opts=()
    [ "$th" != 0 ] && opts+=(--threads "$th")
    [ "$ch" != 0 ] && opts+=(--chunk "$ch")
    [ "$cn" != 0 ] && opts+=(--chunks "$cn")
    [ "$bl" != 0 ] && opts+=(--block "$bl")
    r=$(brow "$k" --devices 1 --path read --iters 2 "${opts[@]}" | tail -1)
    if awk -v a="$r" -v b="$best_rate" 'BEGIN { exit !(a > b) }'; then best_rate=$r best_knobs=$k; fi
  done
fi
awk -v a="$best_rate" -v b="$board_rate" 'BEGIN { exit !(a >= 1.05 * b) }' || best_knobs=""
none="none over 1.05 x the board's"
echo "  best sweep row: ${best_knobs:-$none} ($best_rate against $board_rate GB/s)" | tee -a "$log"
brow board --devices 2 --path read --iters 2 > /dev/null
brow board --devices 2 --split columns --path read --iters 2 > /dev/null
if [ $lab = 1 ]; then # the narrow rows packed once each chunk is read, then by the readers again
  brow after-read --devices 2 --split columns --path read,memcpy --iters 2 --pack-after-read > /dev/null
  brow board --devices 2 --split columns --path read,memcpy --iters 2 > /dev/null
fi

# One service run: JSON (its last line) + the labels into load.jsonl; the text into the log.
serve() { # file type devices cache knobs
  local out rc extra=()
  [ -n "$5" ] && extra=(--load-knobs "$5")
  out=$(timeout 150 "$B/vkrt-service" --weights "$1" --devices "$3" --tokens 2 --verify 0 \
        --warmup-ms 0 --json "${extra[@]}" 2>&1); rc=$?
  grep -E "pinned host|loaded|load structure|weights via|time to first token" <<< "$out" | sed 's/^/  /' >> "$log"
  if [ $rc -ne 0 ] || ! grep -q '^{' <<< "$out"; then
    echo "  $2 on $3 device(s), $4: vkrt-service exit $rc: $(tail -3 <<< "$out" | tr '\n' ' ')" | tee -a "$log"
    return
  fi
  grep '^{' <<< "$out" | tail -1 | sed "s/^{/{\"type\": \"$2\", \"devices\": $3, \"cache\": \"$4\", \"knobs\": \"${5:-board}\", \"file_bytes\": $(stat -c %s "$1"), \"disk_gbps\": $disk, /" >> "$jsonl"
}

for cache in $CACHES; do
  [ $cache = cold ] && [ $can_drop = 0 ] && { echo "  not root: no cold rows" | tee -a "$log"; continue; }
  for t in $TYPES; do
    f="$D/$PRESET-$t.gguf"
    [ $cache = warm ] && warm "$f"
    for n in $DEVICES; do
      step "service $t, $n device(s), $cache"
      [ $cache = cold ] && drop
      serve "$f" "$t" "$n" "$cache" ""
      if [ $cache = warm ] && [ -n "$best_knobs" ]; then
        step "service $t, $n device(s), $cache, knobs $best_knobs"
        serve "$f" "$t" "$n" "$cache" "$best_knobs"
      fi
    done
  done
done

step table
python3 - "$jsonl" "$OUT/load.md" <<'PY' | tee -a "$log"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = ["| file | GB | devices | cache | knobs | page cache | path | load GB/s | x pinned (GB/s) | "
       "x pinned into every device at once (GB/s) | x disk | time to first token s | target s |",
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    gb = r["file_bytes"] / 1e9
    disk = r["disk_gbps"]
    target = 1.2 * gb / disk + 1 if disk > 0 else 0
    every = r.get("pinned_all_devices_gbps", 0)
    out.append("| %s | %.1f | %d | %s | %s | %s | %s | %.2f | %.2f (%.1f) | %s | %.2f | %.2f | %s |" % (
        r["type"], gb, r["devices"], r["cache"], r["knobs"],
        "%.0f%%" % (r["resident"] * 100) if r["resident"] >= 0 else "-", r["load_path"],
        r["load_gbps"], r["load_vs_pinned"], r["pinned_h2d_gbps"],
        "%.2f (%.1f)" % (r["load_vs_pinned_all"], every) if every > 0 else "-",
        r["load_gbps"] / disk if disk > 0 else 0, r["ttft_s"],
        "%.1f" % target if r["cache"] == "cold" else "-"))
text = "\n".join(out)
open(sys.argv[2], "w").write(text + "\n")
print(text)
print("targets: warm >= 0.8 x pinned; cold >= 0.9 x disk; cold time to first token <= target")
PY
step done
