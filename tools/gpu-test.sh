#!/usr/bin/env bash
# The whole test suite on the GPU machine, through the device tool.
#
# Here: build the board and pack what the GPU machine needs into one folder (cmocka is not
# installed there and Debian ships no libcmocka.a, so libcmocka.so.0 travels along):
#   tools/gpu-test.sh pack build-h200 conformance
# There (the folder carried, e.g. carry [".gl", "conformance"]):
#   . .gl/vk-env.sh; conformance/tools/gpu-test.sh run conformance/build-h200
# The run prints the machine, the probe, then tests/run (every program; no sync-validation
# pass and no script tests: there is no validation layer there), then vkrt-probe --json
# --exercise (the upload counters of each path after a small run); the log and both probe
# JSONs land in $OUT.
set -u
mode=${1:-}
B=${2:-build-h200}
case "$mode" in
pack)
  dest=${3:?usage: tools/gpu-test.sh pack BUILDDIR DEST}
  root=$(cd "$(dirname "$0")/.." && pwd)
  rm -rf "$dest" && mkdir -p "$dest/tools" "$dest/tests/fuzz" "$dest/$(basename "$B")" "$dest/lib"
  cp "$root/tests/run" "$dest/tests/"
  cp "$root/tools/gpu-test.sh" "$dest/tools/"
  cp -r "$root/tests/fuzz/corpus" "$root/tests/fuzz/regressions" "$dest/tests/fuzz/"
  out="$dest/$(basename "$B")"
  # The allocation-failure matrix last: it is the longest, and a timeout there must not
  # cost the other programs' results.
  { grep -v '^fault ' "$B/tests.list"; grep '^fault ' "$B/tests.list"; } > "$out/tests.list"
  while read -r kind name; do
    mkdir -p "$out/tests/$kind"
    strip -o "$out/tests/$kind/$name" "$B/tests/$kind/$name"
  done < "$B/tests.list"
  mkdir -p "$out/bin"
  strip -o "$out/bin/vkrt-probe" "$B/bin/vkrt-probe"
  cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 "$dest/lib/"
  du -sh "$dest"
  ;;
run)
  here=$(cd "$(dirname "$0")/.." && pwd)
  B=$(cd "$B" && pwd)
  OUT=${OUT:-/tmp/vkrt-gpu-test}
  mkdir -p "$OUT"
  export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  {
    echo "### machine"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    date -u
    echo "### probe"
    "$B/bin/vkrt-probe" --json > "$OUT/probe-before.json" 2>&1
    "$B/bin/vkrt-probe" 2>&1 | grep '^vkrt: dev[0-9] ->\|import\|transport\|copy path' | head -20
    echo "### tests"
    cd "$here" && VKRT_TEST_SCRIPTS=0 VKRT_TEST_SYNC_PASS=0 \
      VKRT_TEST_PROGRAM_TIMEOUT=${PROGRAM_TIMEOUT:-150} \
      timeout "${TEST_TIMEOUT:-270}" tests/run --builddir "$B" > "$OUT/tests.txt" 2>&1
    echo "tests/run exit $?"
    grep '^== \|^  \|passed, ' "$OUT/tests.txt" | tail -40
    echo "### native_fd cases"
    grep -E 'native' "$OUT/tests.txt" | grep -E 'OK|FAILED|skipped' | head -20
    "$B/bin/vkrt-probe" --json --exercise > "$OUT/probe-after.json" 2>&1
    echo "### upload counters after vkrt-probe --exercise"
    grep -o '"upload_counters": {[^}]*}' "$OUT/probe-after.json"
  } 2>&1 | tee "$OUT/log.txt"
  ;;
*)
  echo "usage: tools/gpu-test.sh pack BUILDDIR DEST | run BUILDDIR"
  exit 2
  ;;
esac
