#!/usr/bin/env bash
# Every configuration Kconfig can produce is buildable: allyesconfig, allnoconfig and seeded
# randconfigs all configure, build and pass their unit tests; none may be refused (the
# constraints are depends on / hidden helpers / choices, not configure checks).
# `make test` runs the quick subset: 3 seeds (VKRT_RANDCONFIG_SEEDS), and allyesconfig builds
# the library and unit tests only. `make test-matrix` runs the whole matrix: 50 seeds and
# allyesconfig builds everything (tools, every test program).
# Kept fast: the SPIR-V kernels come from the suite's build folder (lib.sh), allyesconfig
# compiles the ones it lacks; each other configuration builds libvkrt.a and the unit tests
# only, takes its kernels from those two folders (configure --kernels-from) and reuses one
# build folder through ccache, so a C file whose preprocessed
# text does not depend on the configuration is compiled once; -O1 (flow warnings such as
# maybe-uninitialized stay on) without debug info. The boards build at the shipping -O2 -g in
# boards.sh.
. "$(dirname "$0")/lib.sh"
seeds=${VKRT_RANDCONFIG_SEEDS:-3}
seed_list=${VKRT_RANDCONFIG_SEED_LIST:-$(seq 1 "$seeds")}  # e.g. '17 23' to re-check two seeds
seeds=$(wc -w <<< "$seed_list")
start=$SECONDS

"${KTOOL[@]}" --config "$SCRATCH/allyes.config" allyesconfig >/dev/null
if [ "$seeds" -ge 50 ]; then
  build_config allyes || { tail -30 "$SCRATCH/allyes.log"; fail "allyesconfig does not build"; }
  echo "allyesconfig: builds (everything, $((SECONDS - start)) s)"
else
  yes_dir="$SCRATCH/build-allyes"
  build_config allyes lib && units=$(awk -v d="$yes_dir" '$1 == "unit" {print d "/tests/unit/" $2}' "$yes_dir/tests.list") &&
    ninja -C "$yes_dir" $units >> "$SCRATCH/allyes.log" 2>&1 || { tail -30 "$SCRATCH/allyes.log"; fail "allyesconfig does not build"; }
  echo "allyesconfig: library, every kernel and the unit tests build ($((SECONDS - start)) s)"
fi

# check_one <name>: configure $SCRATCH/<name>.config into the reused folder, build the library
# and the unit tests, run them.
dir="$SCRATCH/build-matrix"
check_one() {
  local name=$1 units
  export CCACHE_BASEDIR=/ CCACHE_NOHASHDIR=1
  if ! (cd "$ROOT" && ./configure --config "$SCRATCH/$name.config" --builddir "$dir" --cc "$TEST_CC" \
          --kernels-from "$SCRATCH/build-allyes" ${SUITE_BUILD:+--kernels-from "$SUITE_BUILD"} \
          --opt=-O1 --extra-cflags=-g0) > "$SCRATCH/$name.log" 2>&1; then
    cat "$SCRATCH/$name.log"; fail "$name refused by configure ($SCRATCH/$name.config)"
  fi
  units=$(awk -v d="$dir" '$1 == "unit" {print d "/tests/unit/" $2}' "$dir/tests.list")
  # shellcheck disable=SC2086
  ninja -C "$dir" lib $units >> "$SCRATCH/$name.log" 2>&1 || {
    tail -30 "$SCRATCH/$name.log"; fail "$name does not build ($SCRATCH/$name.config)"; }
  VKRT_TEST_SYNC_PASS=0 VKRT_TEST_SCRIPTS=0 "$ROOT/tests/run" --builddir "$dir" --filter unit/ \
    > "$SCRATCH/$name.unit.log" 2>&1 || {
    tail -20 "$SCRATCH/$name.unit.log"; fail "unit tests fail for $name ($SCRATCH/$name.config)"; }
  grep -q "^0 passed" "$SCRATCH/$name.unit.log" && fail "$name: no unit test ran"
  return 0
}

"${KTOOL[@]}" --config "$SCRATCH/allno.config" allnoconfig >/dev/null
check_one allno
echo "allnoconfig: builds, $(tail -1 "$SCRATCH/allno.unit.log")"

for seed in $seed_list; do
  t=$SECONDS
  "${KTOOL[@]}" --config "$SCRATCH/rand-$seed.config" randconfig --seed "$seed" >/dev/null
  check_one "rand-$seed"
  echo "randconfig seed $seed: builds, $(tail -1 "$SCRATCH/rand-$seed.unit.log") ($((SECONDS - t)) s)"
done
hits=""
[ "$TEST_CC" = "${TEST_CC#ccache }" ] ||
  hits=", ccache: $(grep -m1 -iE '^ *hits' <<< "$(ccache --show-log-stats 2>/dev/null)" | tr -s ' ' || true)"
echo "randconfig: $seeds of $seeds seeds build and pass their unit tests, 0 refused ($((SECONDS - start)) s$hits)"
