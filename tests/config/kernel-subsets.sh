#!/usr/bin/env bash
# Each kernel compiled out leaves the rest working: from the default board, turn one kernel
# off at a time, build, and run the unit tests and the lavapipe ops tests (which check that
# the missing op answers VKRT_ERROR_UNSUPPORTED and the others still match the CPU).
. "$(dirname "$0")/lib.sh"
for kernel in COPY TRANSPOSE CONCAT MATMUL Q8_0 Q4_K SWIGLU ATTENTION TYPE_F16; do
  sym=VKRT_KERNEL_$kernel
  [ "$kernel" = TYPE_F16 ] && sym=VKRT_TYPE_F16
  name=no-$(echo "$kernel" | tr 'A-Z_' 'a-z-')
  grep -v "$sym" "$ROOT/boards/sim-lavapipe-x2/defconfig" > "$SCRATCH/$name.frag"
  echo "# CONFIG_$sym is not set" >> "$SCRATCH/$name.frag"
  config_from "$name" "$SCRATCH/$name.frag"
  grep -q "^CONFIG_$sym=y" "$SCRATCH/$name.config" && fail "$sym did not turn off"
  build_config "$name" || { tail -30 "$SCRATCH/$name.log"; fail "$name does not build"; }
  filter=test_ops
  case $kernel in Q8_0|Q4_K|SWIGLU) filter=test_quant ;; ATTENTION) filter=test_attention ;; esac
  VKRT_TEST_SYNC_PASS=0 VKRT_TEST_SCRIPTS=0 "$ROOT/tests/run" --builddir "$SCRATCH/build-$name" \
    --filter $filter > "$SCRATCH/$name.test.log" 2>&1 \
    || { tail -30 "$SCRATCH/$name.test.log"; fail "$name: ops tests fail"; }
  echo "$name: builds; $(tail -1 "$SCRATCH/$name.test.log")"
  rm -rf "$SCRATCH/build-$name"
done
