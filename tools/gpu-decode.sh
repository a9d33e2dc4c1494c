#!/usr/bin/env bash
# Decode-speed run on a GPU machine: probe, submit/wait floors, vkrt-service
# --devices 1 (8 layers, hidden 4096, ffn 16384, f16 SwiGLU: 3 GiB of GGUF weights) with and without the
# warm-up, and tools/bench/cases/decode.txt (VARIANTS=--variants adds the matvec sweep).
# Usage (on the GPU machine): tools/gpu-decode.sh BUILDDIR   (results in $OUT/decode.tgz)
set -u
B=${1:?builddir}/bin
O=${OUT:-/tmp}/decode; mkdir -p "$O"
root=$(cd "$(dirname "$0")/.." && pwd)
step() { echo "== $1 $(date +%T)" | tee -a "$O/log.txt"; }
step probe;   timeout 20 "$B/vkrt-probe" > "$O/probe.txt" 2>&1
step sync;    timeout 30 "$B/vkrt-bench" sync --json > "$O/sync.json" 2>>"$O/log.txt"; timeout 20 "$B/vkrt-bench" sync >> "$O/log.txt" 2>&1
step weights; timeout 60 "$B/vkrt-service" --make-gguf /tmp/w.gguf --layers 8 --hidden 4096 --ffn 16384 --dtype f16 >> "$O/log.txt" 2>&1
step service; timeout 60 "$B/vkrt-service" --weights /tmp/w.gguf --devices 1 --tokens "${TOKENS:-64}" > "$O/service1.txt" 2>&1; echo "service rc $?" >> "$O/log.txt"
step service-nowarm; timeout 30 "$B/vkrt-service" --weights /tmp/w.gguf --devices 1 --tokens 16 --warmup-ms 0 > "$O/service1-nowarm.txt" 2>&1; echo "service rc $?" >> "$O/log.txt"
step cases;   timeout "${CASES_T:-110}" "$B/vkrt-bench" cases --test-file "${CASES:-$root/tools/bench/cases/decode.txt}" --json ${VARIANTS:-} > "$O/cases.json" 2>>"$O/log.txt"; echo "cases rc $?" >> "$O/log.txt"
step done
cd "$(dirname "$O")" && tar czf decode.tgz decode && rm -rf decode
