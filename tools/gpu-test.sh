#!/usr/bin/env bash
# The whole test suite on a GPU machine (docs/gpu-tests.md).
#
# Here: build the board and pack what the GPU machine needs into one folder (cmocka is not
# installed there and Debian ships no libcmocka.a, so libcmocka.so.0 travels along; the model
# tests' tests/data/stories260K.gguf, vkrt-service, tests/model/stories.sh and llama-types.sh too):
#   tools/gpu-test.sh pack build-h200 conformance
# There (the folder copied over, the Vulkan driver's environment set):
#   conformance/tools/gpu-test.sh run conformance/build-h200
# The run prints the machine and the probe, then runs every test program at once (tests/run
# --jobs: one job per program; no sync-validation pass and no script tests, there is no
# validation layer there) and, beside them, tests/model/stories.sh (vkrt-service on
# stories260K, when python3 is there) and then tests/model/llama-types.sh; then vkrt-probe --json --exercise (the upload counters
# of each path after a small run). The log, tests/run's and the model script's output, each
# program's whole output (logs.tar.gz) and both probe JSONs land in $OUT (default /tmp/vkrt-gpu-test).
# Limits: PROGRAM_TIMEOUT per program (default 480 s: test_allreduce, test_core and
# test_alloc_fail need 260-335 s when every program and the model scripts' vkrt-service runs
# share the GPU and 16 CPUs), TEST_TIMEOUT for the whole run (default 520 s: inside a
# 600-second call with the probe), JOBS programs at once (default: all of them).
set -u
mode=${1:-}
B=${2:-build-h200}
case "$mode" in
pack)
  dest=${3:?usage: tools/gpu-test.sh pack BUILDDIR DEST}
  root=$(cd "$(dirname "$0")/.." && pwd)
  rm -rf "$dest" && mkdir -p "$dest/tools" "$dest/tests/fuzz" "$dest/tests/model" "$dest/$(basename "$B")" "$dest/lib"
  cp "$root/tests/run" "$dest/tests/"
  cp "$root/tools/gpu-test.sh" "$dest/tools/"
  cp -r "$root/tests/fuzz/corpus" "$root/tests/fuzz/regressions" "$dest/tests/fuzz/"
  cp -r "$root/tests/data" "$dest/tests/"
  cp "$root/tests/model/lib.sh" "$root/tests/model/stories.sh" "$root/tests/model/llama-types.sh" \
     "$dest/tests/model/"
  out="$dest/$(basename "$B")"
  cp "$B/tests.list" "$out/tests.list"
  while read -r kind name; do
    mkdir -p "$out/tests/$kind"
    strip -o "$out/tests/$kind/$name" "$B/tests/$kind/$name"
  done < "$B/tests.list"
  mkdir -p "$out/bin" "$out/include/vkrt"
  for tool in vkrt-probe vkrt-service; do
    [ -x "$B/bin/$tool" ] && strip -o "$out/bin/$tool" "$B/bin/$tool"
  done
  cp "$B/include/vkrt/config.h" "$out/include/vkrt/"
  cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 "$dest/lib/"
  du -sh "$dest"
  ;;
run)
  here=$(cd "$(dirname "$0")/.." && pwd)
  B=$(cd "$B" && pwd)
  OUT=${OUT:-/tmp/vkrt-gpu-test}
  PROGRAM_TIMEOUT=${PROGRAM_TIMEOUT:-480} TEST_TIMEOUT=${TEST_TIMEOUT:-520}
  mkdir -p "$OUT"
  export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  programs=$(grep -vc '^mpi ' "$B/tests.list")
  {
    echo "### machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    date -u
    echo "### probe"
    "$B/bin/vkrt-probe" --json > "$OUT/probe-before.json" 2>&1
    "$B/bin/vkrt-probe" 2>&1 | grep '^vkrt: dev[0-9] ->\|import\|transport\|copy path' | head -20
    echo "### tests ($programs programs, ${JOBS:-$programs} at once, $PROGRAM_TIMEOUT s each at most)"
    start=$SECONDS
    model_pid=""
    if [ -x "$B/bin/vkrt-service" ] && [ -x /usr/bin/python3 ]; then
      (cd "$here" && for script in stories llama-types; do
         VKRT_BUILDDIR="$B" timeout "$PROGRAM_TIMEOUT" tests/model/$script.sh >> "$OUT/model.txt" 2>&1
         echo "tests/model/$script.sh exit $? ($((SECONDS - start)) s)" >> "$OUT/model.txt"
       done) &
      model_pid=$!
    else
      echo "tests/model/stories.sh not run: no vkrt-service or no /usr/bin/python3 here" > "$OUT/model.txt"
    fi
    mkdir -p "$OUT/logs"
    cd "$here" && VKRT_TEST_LOGDIR="$OUT/logs" VKRT_TEST_SCRIPTS=0 VKRT_TEST_SYNC_PASS=0 \
      VKRT_TEST_PROGRAM_TIMEOUT=$PROGRAM_TIMEOUT \
      timeout "$TEST_TIMEOUT" tests/run --builddir "$B" --jobs "${JOBS:-$programs}" > "$OUT/tests.txt" 2>&1
    echo "tests/run exit $? ($((SECONDS - start)) s)"
    grep '^== \|^  \|passed, ' "$OUT/tests.txt" | tail -60
    [ -n "$model_pid" ] && wait "$model_pid"
    echo "### model"
    grep -E '^[0-9] devices: vkrt-service: verified|devices: vkrt-service: verified|exit [0-9]|FAIL|not run' "$OUT/model.txt" | tail -16
    echo "### native_fd cases"
    cat "$OUT"/logs/*.log | grep -E '^\[ *(OK|FAILED|SKIPPED) *\] .*native' | head -20
    "$B/bin/vkrt-probe" --json --exercise > "$OUT/probe-after.json" 2>&1
    echo "### upload counters after vkrt-probe --exercise"
    grep -o '"upload_counters": {[^}]*}' "$OUT/probe-after.json"
  } 2>&1 | tee "$OUT/log.txt"
  tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
  ;;
*)
  echo "usage: tools/gpu-test.sh pack BUILDDIR DEST | run BUILDDIR"
  exit 2
  ;;
esac
