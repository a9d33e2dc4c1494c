#!/usr/bin/env bash
# Seeded mutations: each tests/mutations/NN-name.patch reverts one behaviour, and
# its header names the test that must catch it:
#   # test: <kind>/<program> [<cmocka case or pattern>]   or   # test: script <path>
#   # board: <board>            (default sim-lavapipe-x2)
#   # env: VAR=value ...        (set for the test run)
#   # build: all                (a script that runs the board's programs: the whole board is
#                                built first and the script runs with VKRT_BUILDDIR set to it)
#   # gpu-only: <why>           (the test skips on lavapipe; a skip is reported, not a miss)
# For each patch, in a copy of the tree (tracked and untracked, not ignored, files) under
# $MUTATION_WORKDIR (default /tmp/vkrt-mutations-$UID): the named test runs unmutated and must
# pass, then with the patch applied it must FAIL. One build folder per board is reused across
# mutations and runs (ninja rebuilds only what a patch touched). Prints per mutation
#   caught by <test>: <first failing line>   |   NOT CAUGHT   |   GPU-only: ...
# and exits nonzero if any mutation was not caught or a baseline failed. Not part of
# `make test` (each mutation rebuilds libvkrt and links a test program).
# Usage: tools/mutation-check.sh [--no-baseline] [PATTERN]   (PATTERN picks patches by name)
# The gpu-only mutations on the GPU machine (docs/mutations.md): here
#   tools/mutation-check.sh --pack DEST [PATTERN]   (board $GPU_BOARD, default nvidia-h200-x1)
# builds the named program of each gpu-only patch unmutated and mutated into DEST; there
#   DEST/mutation-check.sh --run-packed DEST
# runs each pair with the same rules.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
work=${MUTATION_WORKDIR:-/tmp/vkrt-mutations-$(id -u)}
src=$work/src
baseline=1 pattern="" pack="" packed=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-baseline) baseline=0; shift ;;
    --pack) pack=$2; shift 2 ;;
    --run-packed) packed=$2; shift 2 ;;
    -*) echo "usage: $0 [--no-baseline] [--pack DEST | --run-packed DEST] [PATTERN]"; exit 2 ;;
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

# build <board> [<kind/program>]: configure once per board, then build that program only (or,
# without one, the whole board).
build() {
  local board=$1 b=$work/build-$1
  if [ ! -f "$b/build.ninja" ]; then
    (cd "$src" && make -s O="$b" "${board}_defconfig" &&
     ./configure --builddir "$b" --config "$b/.config") > "$work/configure-$board.log" 2>&1 ||
      { tail -20 "$work/configure-$board.log"; return 1; }
  fi
  ninja -C "$b" ${2:+"$b/tests/$2"} > "$work/build.log" 2>&1 || { grep -A5 -m3 'error' "$work/build.log"; return 1; }
}

# run_test <patch> [<prebuilt tests folder>] -> $out, $rc
run_test() {
  local p=$1 prebuilt=${2:-} test board envs
  test=$(header "$p" test) board=$(header "$p" board) envs=$(header "$p" env)
  board=${board:-sim-lavapipe-x2}
  if [[ $test == script\ * ]]; then
    if [ "$(header "$p" build)" = all ]; then
      if ! out=$(build "$board" "" 2>&1); then rc=125; out="build failed: $out"; return; fi
      envs="VKRT_BUILDDIR=$work/build-$board $envs"
    fi
    out=$(cd "$src" && env $envs "./${test#script }" 2>&1); rc=$?
    return
  fi
  local prog=${test%% *} case="" tests=$prebuilt
  [[ $test == *\ * ]] && case=${test#* }
  if [ -z "$tests" ]; then
    if ! out=$(build "$board" "$prog" 2>&1); then rc=125; out="build failed: $out"; return; fi
    tests=$work/build-$board/tests
  fi
  out=$(env $envs timeout 900 "$tests/$prog" ${case:+"$case"} 2>&1); rc=$?
}

# verdict <name> <patch>: from the mutated run's $out/$rc; counts $missed, $broken.
verdict() {
  local name=$1 test gpu
  test=$(header "$2" test) gpu=$(header "$2" gpu-only)
  if [ $rc -eq 125 ]; then
    echo "$name: mutated tree does not build: $out"; broken=$((broken + 1))
  elif [ $rc -ne 0 ]; then
    echo "$name: caught by $test: $(first_failure)"
  elif [ -n "$gpu" ] && grep -q '^vkrt-test: skipped' <<< "$out"; then
    echo "$name: GPU-only, $test skipped here: $gpu"
  else
    echo "$name: NOT CAUGHT by $test"; missed=$((missed + 1))
  fi
}

# apply/restore <patch>: in the copy; restoring writes fresh mtimes, so ninja rebuilds.
apply() { (cd "$src" && patch -s -p1 --no-backup-if-mismatch < "$1"); }
restore() {
  local f
  for f in $(sed -n 's|^+++ b/||p' "$1"); do cp "$root/$f" "$src/$f"; done
}

# The first failure message (cmocka's "ERROR: " of fail_msg, an assertion's values, a script's
# "FAIL: ", test_mpi's "host<r>: FAIL ") and where it was raised; a program killed by a signal
# says so.
first_failure() {
  local msg at
  msg=$(printf '%s\n' "$out" | sed -n -E '/^\[  ERROR   \] --- \[   LINE/d; s/^(ERROR: |FAIL: |\[  ERROR   \] --- )//p; s/^test_mpi: (host[0-9]+: FAIL )/\1/p' | head -1)
  at=$(printf '%s\n' "$out" | sed -n -E 's/.*\[   LINE   \] --- ([^ ]*): error: Failure!.*/\1/p' | head -1)
  [ -n "$msg" ] || msg=$(printf '%s\n' "$out" | tail -1)
  [ "$rc" -gt 128 ] && [ "$rc" -lt 160 ] && [ "$rc" -ne 137 ] && msg="killed by signal $((rc - 128)); last line: $msg"
  printf '%s%s' "$msg" "${at:+ ($at)}"
}

missed=0 broken=0
if [ -n "$packed" ]; then # on the GPU machine: DEST/<name>/{base,mutant}/<kind>/<program>
  export LD_LIBRARY_PATH="$packed/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for p in "$packed"/patches/*.patch; do
    name=$(basename "$p" .patch)
    [ -d "$packed/$name" ] || continue
    run_test "$p" "$packed/$name/base"
    if [ $rc -ne 0 ] || grep -q '^vkrt-test: skipped' <<< "$out"; then
      echo "$name: BASELINE FAILS or skips (exit $rc): $(first_failure)"; broken=$((broken + 1))
      continue
    fi
    run_test "$p" "$packed/$name/mutant"
    verdict "$name" "$p"
  done
  echo "mutations: $missed not caught, $broken broken"
  [ $missed -eq 0 ] && [ $broken -eq 0 ]
  exit
fi

sync_tree
if [ -n "$pack" ]; then
  board=${GPU_BOARD:-nvidia-h200-x1}
  mkdir -p "$pack/patches" "$pack/lib"
  cp "$0" "$pack/mutation-check.sh"
  cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 "$pack/lib/"
  for p in "$root"/tests/mutations/*.patch; do
    name=$(basename "$p" .patch) prog=$(header "$p" test)
    prog=${prog%% *}
    [ -n "$pattern" ] && [[ $name != *$pattern* ]] && continue
    [ -n "$(header "$p" gpu-only)" ] || continue
    cp "$p" "$pack/patches/"
    for variant in base mutant; do
      [ $variant = mutant ] && { apply "$p" || exit 1; }
      build "$board" "$prog" || { restore "$p"; exit 1; }
      mkdir -p "$pack/$name/$variant/$(dirname "$prog")"
      strip -o "$pack/$name/$variant/$prog" "$work/build-$board/tests/$prog"
    done
    restore "$p"
    echo "packed $name ($prog, $board)"
  done
  du -sh "$pack"
  exit
fi

declare -A base_ok
for p in "$root"/tests/mutations/*.patch; do
  name=$(basename "$p" .patch)
  [ -n "$pattern" ] && [[ $name != *$pattern* ]] && continue
  test=$(header "$p" test)
  key="$(header "$p" board)|$test|$(header "$p" env)"
  if [ $baseline = 1 ] && [ -z "${base_ok[$key]:-}" ]; then
    run_test "$p"
    if [ $rc -ne 0 ]; then
      echo "$name: BASELINE FAILS ($test, unmutated, exit $rc): $(first_failure)"
      broken=$((broken + 1)); continue
    fi
    base_ok[$key]=1
  fi
  apply "$p" || { echo "$name: patch does not apply"; broken=$((broken + 1)); continue; }
  run_test "$p"
  restore "$p"
  verdict "$name" "$p"
done
echo "mutations: $missed not caught, $broken broken"
[ $missed -eq 0 ] && [ $broken -eq 0 ]
