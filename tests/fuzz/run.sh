#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer harnesses (clang, ASan + UBSan) in build-fuzz and runs each
# for a bounded time (FUZZ_SECONDS, default 60) or FUZZ_RUNS executions, from the seed corpus
# in tests/fuzz/corpus/<name> (copied: the tree is not modified). A crash input is kept under
# build-fuzz/crashes/ — add it to tests/fuzz/regressions/<name>/ so it is replayed forever.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${FUZZ_BUILDDIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
runs=${FUZZ_RUNS:--1}
cd "$root"
[ -f .config ] || /usr/bin/python3 tools/kconfig.py defconfig boards/sim-lavapipe-x2/defconfig >/dev/null
CC=clang ./configure --builddir "$builddir" --sanitize fuzz --opt=-O1 >/dev/null
rc=0
for harness in fuzz_api_validation fuzz_board_config; do
  ninja -C "$builddir" "fuzz-$harness" >/dev/null
  work="$builddir/corpus-$harness"
  mkdir -p "$work" "$builddir/crashes"
  cp -n tests/fuzz/corpus/$harness/* "$work/" 2>/dev/null || true
  # Regressions first: every kept crash input must pass.
  if ls tests/fuzz/regressions/$harness/* >/dev/null 2>&1; then
    "$builddir/fuzz/$harness" tests/fuzz/regressions/$harness/* >/dev/null 2>&1 || { echo "$harness: regression input fails"; rc=1; }
  fi
  log="$builddir/$harness.log"
  if "$builddir/fuzz/$harness" -max_total_time="$seconds" -runs="$runs" -print_final_stats=1 \
       -artifact_prefix="$builddir/crashes/$harness-" "$work" > "$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "$harness: $execs executions, no crash ($(grep -c . <(ls "$work")) corpus entries)"
  else
    echo "$harness: CRASH"; grep -A30 "ERROR\|Assertion\|runtime error" "$log" | head -40; rc=1
  fi
done
exit $rc
