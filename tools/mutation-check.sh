#!/usr/bin/env bash
# Seeded mutations (issue 13): each tests/mutations/NN-name.patch reverts one behaviour, and
# its header names the test that must catch it:
#   # test: <kind>/<program> [<cmocka case or pattern>]   or   # test: script <path>
#   # board: <board>            (default sim-lavapipe-x2)
#   # env: VAR=value ...        (set for the test run)
#   # gpu-only: <why>           (the test skips on lavapipe; a skip is reported, not a miss)
# For each patch, in a copy of the tree (tracked and untracked, not ignored, files) under
# $MUTATION_WORKDIR (default /tmp/vkrt-mutations-$UID): the named test runs unmutated and must
# pass, then with the patch applied it must FAIL. One build folder per board is reused across
# mutations and runs (ninja rebuilds only what a patch touched). Prints per mutation
#   caught by <test>: <first failing line>   |   NOT CAUGHT   |   GPU-only: ...
# and exits nonzero if any mutation was not caught or a baseline failed. Not part of
# `make test` (each mutation rebuilds libvkrt and links a test program).
# Usage: tools/mutation-check.sh [--no-baseline] [PATTERN]   (PATTERN picks patches by name)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
work=${MUTATION_WORKDIR:-/tmp/vkrt-mutations-$(id -u)}
src=$work/src
baseline=1 pattern=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-baseline) baseline=0; shift ;;
    -*) echo "usage: $0 [--no-baseline] [PATTERN]"; exit 2 ;;
    *) pattern=$1; shift ;;
  esac
done

# Copy the tree: only files whose content differs are written (with a fresh mtime, so ninja
# rebuilds them, including a file a killed run left mutated).
sync_tree() {
  mkdir -p "$src"
  (cd "$root" && git ls-files -co --exclude-standard -z) |
    while IFS= read -r -d '' f; do
      [ -f "$root/$f" ] || continue
      if ! cmp -s "$root/$f" "$src/$f"; then
        mkdir -p "$(dirname "$src/$f")"
        cp "$root/$f" "$src/$f"
      fi
    done
}

header() { # patch key -> value of "# key: value"
  sed -n "s/^# $2: //p" "$1" | head -1
}

# build <board> <kind/program>: configure once per board, then build that program only.
build() {
  local board=$1 b=$work/build-$1
  if [ ! -f "$b/build.ninja" ]; then
    (cd "$src" && make -s O="$b" "${board}_defconfig" &&
     ./configure --builddir "$b" --config "$b/.config") > "$work/configure-$board.log" 2>&1 ||
      { tail -20 "$work/configure-$board.log"; return 1; }
  fi
  ninja -C "$b" "$b/tests/$2" > "$work/build.log" 2>&1 || { grep -A5 -m3 'error' "$work/build.log"; return 1; }
}

# run_test <patch> -> $out, $rc
run_test() {
  local p=$1 test board envs
  test=$(header "$p" test) board=$(header "$p" board) envs=$(header "$p" env)
  board=${board:-sim-lavapipe-x2}
  if [[ $test == script\ * ]]; then
    out=$(cd "$src" && env $envs "./${test#script }" 2>&1); rc=$?
    return
  fi
  local prog=${test%% *} case=""
  [[ $test == *\ * ]] && case=${test#* }
  if ! out=$(build "$board" "$prog" 2>&1); then rc=125; out="build failed: $out"; return; fi
  out=$(cd "$src" && env VKRT_BUILDDIR="$work/build-$board" $envs \
        timeout 900 "$work/build-$board/tests/$prog" ${case:+"$case"} 2>&1); rc=$?
}

first_failure() {
  local line
  line=$(printf '%s\n' "$out" | grep -m1 -E '^\[  ERROR   \] --- |^FAIL: |: error: |Failure!|vkrt-test: .*(got|differs|wrong [1-9])' || true)
  [ -n "$line" ] || line=$(printf '%s\n' "$out" | tail -1)
  printf '%s' "$line"
}

sync_tree
missed=0 broken=0
declare -A base_ok
for p in "$root"/tests/mutations/*.patch; do
  name=$(basename "$p" .patch)
  [ -n "$pattern" ] && [[ $name != *$pattern* ]] && continue
  test=$(header "$p" test) gpu=$(header "$p" gpu-only)
  key="$(header "$p" board)|$test|$(header "$p" env)"
  if [ $baseline = 1 ] && [ -z "${base_ok[$key]:-}" ]; then
    run_test "$p"
    if [ $rc -ne 0 ]; then
      echo "$name: BASELINE FAILS ($test, unmutated, exit $rc): $(first_failure)"
      broken=$((broken + 1)); continue
    fi
    base_ok[$key]=1
  fi
  files=$(sed -n 's|^+++ b/||p' "$p")
  if ! (cd "$src" && patch -s -p1 --no-backup-if-mismatch < "$p"); then
    echo "$name: patch does not apply"; broken=$((broken + 1)); continue
  fi
  run_test "$p"
  for f in $files; do cp "$root/$f" "$src/$f"; done # fresh mtime: rebuilt next time
  if [ $rc -eq 125 ]; then
    echo "$name: mutated tree does not build: $out"; broken=$((broken + 1))
  elif [ $rc -ne 0 ]; then
    echo "$name: caught by $test: $(first_failure)"
  elif [ -n "$gpu" ] && grep -q '^vkrt-test: skipped' <<< "$out"; then
    echo "$name: GPU-only ($gpu): $test skipped here"
  else
    echo "$name: NOT CAUGHT by $test"; missed=$((missed + 1))
  fi
done
echo "mutations: $missed not caught, $broken broken"
[ $missed -eq 0 ] && [ $broken -eq 0 ]
