#!/usr/bin/env bash
# The H200 figures (docs/perf.md), run on the GPU machine:
#   tools/gpu-bench.sh build-h200
# build-h200 is built here for boards/nvidia-h200-x1 (see docs/perf.md). Every result goes to
# $OUT as JSON (at most 8 files come back), and a one-screen summary is printed last.
set -u
B=${1:-build-h200}
OUT=${OUT:-/tmp/vkrt-gpu-out}
QUICK=${QUICK:-0}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
log="$OUT/log.txt"
step() { echo "### $*" | tee -a "$log"; }
{
  step "machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  date -u
  step "probe"
  "$B/bin/vkrt-probe" --json > "$OUT/probe.json" 2>>"$log"
  "$B/bin/vkrt-probe" 2>&1
  step "cuda baseline"
  timeout 120 python3 tools/cuda_baseline.py $((1 << 30)) > "$OUT/cuda.json" 2>>"$log"
  cat "$OUT/cuda.json"
  step "upload"
  timeout 200 "$B/bin/vkrt-bench" upload --json --no-progress --size ${UPLOAD_SIZE:-2G} --threads 16 > "$OUT/upload.json" 2>>"$log"
  cat "$OUT/upload.json"
  step "ops"
  : > "$OUT/ops.json"
  for c in copy transpose concat matmul; do
    timeout 120 "$B/bin/vkrt-bench" $c --json >> "$OUT/ops.json" 2>>"$log"
    echo >> "$OUT/ops.json"
  done
  cat "$OUT/ops.json"
  step "pipelines"
  # the driver's statistics (registers, shared memory) of the kernels of a Llama token: a
  # kernel past its register budget loses workgroups an SM
  VKRT_BENCH_LOG=info timeout 60 "$B/bin/vkrt-bench" cases --activations q8 \
    --test-file tools/bench/cases/q4k-products.txt 2>&1 | grep 'pipeline .*Register' | sort -u
  step "allreduce"
  timeout 240 "$B/bin/vkrt-bench" allreduce --json --transport all > "$OUT/allreduce.json" 2>>"$log"
  timeout 60 "$B/bin/vkrt-bench" allreduce --transport all --max 64K 2>&1 | tail -40
  step "service"
  "$B/bin/vkrt-service" --make-gguf /tmp/w.gguf --layers 8 --hidden 4096 --ffn 16384 --dtype f16
  timeout 120 "$B/bin/vkrt-service" --weights /tmp/w.gguf --tokens 200 --seconds 20 2>&1 | grep -v '^vkrt: dev[0-9] \(uuid\|limits\|heap\|memory\|storage\|timeline\|external\)'
  if [ "$QUICK" != 1 ]; then
    step "tests"
    VKRT_TEST_SCRIPTS=0 VKRT_TEST_SYNC_PASS=0 timeout 300 tests/run --builddir "$B" > "$OUT/tests.txt" 2>&1
    tail -15 "$OUT/tests.txt"
  fi
} 2>&1 | tee -a "$log"
step "summary"
python3 tools/perf_summary.py "$OUT" 2>&1 | tee "$OUT/summary.txt"
