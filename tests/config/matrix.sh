#!/usr/bin/env bash
# allyesconfig builds; allnoconfig builds or is refused clearly; 20 seeded randconfigs build
# (or are refused with the "impossible configuration" message); unit tests run for a few.
. "$(dirname "$0")/lib.sh"
seeds=${VKRT_RANDCONFIG_SEEDS:-20}

"${KTOOL[@]}" --config "$SCRATCH/allyes.config" allyesconfig >/dev/null
build_config allyes || { tail -30 "$SCRATCH/allyes.log"; fail "allyesconfig does not build"; }
echo "allyesconfig: builds"

"${KTOOL[@]}" --config "$SCRATCH/allno.config" allnoconfig >/dev/null
if build_config allno; then
  echo "allnoconfig: builds"
else
  grep -q "impossible configuration\|error:" "$SCRATCH/allno.log" || fail "allnoconfig failed without a clear message"
  echo "allnoconfig: refused: $(grep -m1 'error' "$SCRATCH/allno.log")"
fi

built=0 refused=0
for seed in $(seq 1 "$seeds"); do
  name=rand-$seed
  "${KTOOL[@]}" --config "$SCRATCH/$name.config" randconfig --seed "$seed" >/dev/null
  if (cd "$ROOT" && ./configure --config "$SCRATCH/$name.config" --builddir "$SCRATCH/build-$name") \
       > "$SCRATCH/$name.log" 2>&1; then
    ninja -C "$SCRATCH/build-$name" >> "$SCRATCH/$name.log" 2>&1 || {
      tail -30 "$SCRATCH/$name.log"; fail "randconfig seed $seed does not build ($SCRATCH/$name.config)"; }
    built=$((built + 1))
    # The unit tests (no GPU) must pass in every configuration that builds.
    if [ "$seed" -le 3 ]; then
      "$ROOT/tests/run" --builddir "$SCRATCH/build-$name" --filter unit/ > "$SCRATCH/$name.unit.log" 2>&1 || {
        tail -20 "$SCRATCH/$name.unit.log"; fail "unit tests fail for randconfig seed $seed"; }
    fi
  else
    grep -q "impossible configuration" "$SCRATCH/$name.log" || {
      cat "$SCRATCH/$name.log"; fail "randconfig seed $seed refused without a clear message"; }
    refused=$((refused + 1))
  fi
done
echo "randconfig: $built built, $refused refused clearly, of $seeds seeds"
[ "$built" -ge $((seeds / 2)) ] || fail "too few randconfigs build ($built of $seeds)"
