#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer harnesses (clang, ASan + UBSan) in build-fuzz and runs each
# for a bounded time (FUZZ_SECONDS, default 60) or FUZZ_RUNS executions, from the seed corpus
# in tests/fuzz/corpus/<name> (copied: the tree is not modified). A crash, or a unit slower
# than FUZZ_UNIT_TIMEOUT seconds (the code under test is pure validation: microseconds), is kept
# under build-fuzz/crashes/ — add it to tests/fuzz/regressions/<name>/ so it is replayed forever.
# FUZZ_REPLAY_ONLY=1 only replays the seed corpus and the regressions (seconds; `make test`).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${FUZZ_BUILDDIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
runs=${FUZZ_RUNS:--1}
unit_timeout=${FUZZ_UNIT_TIMEOUT:-5}
cd "$root"
config=${FUZZ_CONFIG:-$root/.config}
[ -f "$config" ] || /usr/bin/python3 scripts/kconfig.py --config "$config" defconfig boards/sim-lavapipe-x2/defconfig >/dev/null
# clang 14 is enough: the harnesses need only libvkrt.a and their own file (`ninja fuzz-<name>`
# builds nothing else; the unit tests' _Float16, which clang 14 lacks on x86, is not compiled).
# --cc, not CC=: ninja re-runs configure with the recorded arguments when .config or a
# Sources list changes, and an environment CC would be lost (the harnesses need clang).
if ! out=$(./configure --cc "${FUZZ_CC:-clang}" --builddir "$builddir" --config "$config" --sanitize fuzz --opt=-O1 2>&1); then
  printf '%s\n' "$out"; echo "fuzz: configure failed"; exit 1
fi
rc=0
for harness in fuzz_api_validation fuzz_board_config fuzz_gguf; do
  if ! out=$(ninja -C "$builddir" "fuzz-$harness" 2>&1); then
    printf '%s\n' "$out" | tail -30; echo "$harness: build failed"; exit 1
  fi
  exe="$builddir/fuzz/$harness"
  # Regressions and seeds first: every kept input must pass, within the unit timeout.
  inputs=(tests/fuzz/corpus/$harness/* tests/fuzz/regressions/$harness/*)
  existing=()
  for f in "${inputs[@]}"; do [ -f "$f" ] && existing+=("$f"); done
  if [ ${#existing[@]} -gt 0 ]; then
    if "$exe" -timeout="$unit_timeout" "${existing[@]}" > "$builddir/$harness.replay.log" 2>&1; then
      echo "$harness: replayed ${#existing[@]} seed and regression inputs, no crash"
    else
      echo "$harness: a seed or regression input fails"; tail -30 "$builddir/$harness.replay.log"; rc=1
    fi
  fi
  [ "${FUZZ_REPLAY_ONLY:-0}" = 1 ] && continue
  work="$builddir/corpus-$harness"
  mkdir -p "$work" "$builddir/crashes"
  cp -n tests/fuzz/corpus/$harness/* "$work/" 2>/dev/null || true
  log="$builddir/$harness.log"
  start=$(date +%s)
  if "$exe" -max_total_time="$seconds" -runs="$runs" -timeout="$unit_timeout" -print_final_stats=1 \
       -artifact_prefix="$builddir/crashes/$harness-" "$work" > "$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "$harness: $execs executions in $(( $(date +%s) - start )) s, no crash ($(ls "$work" | wc -l) corpus entries)"
  else
    echo "$harness: CRASH"; grep -A30 "ERROR\|Assertion\|runtime error" "$log" | head -40; rc=1
  fi
done
exit $rc
