#!/usr/bin/env bash
# Each kernel compiled out leaves the rest working: from the default board, turn one kernel
# off at a time, build the library, the tools and the lavapipe ops tests, and run those (they
# check that the missing op answers VKRT_ERROR_UNSUPPORTED and the others still match the CPU).
# `make test` turns off one kernel of each test program's family and f16 (VKRT_KERNEL_SUBSETS
# unset); `make test-matrix` every kernel (VKRT_KERNEL_SUBSETS=all). The validation layer is
# off in these runs: the suite's own passes run the same programs with it and with
# synchronization validation.
. "$(dirname "$0")/lib.sh"
all="COPY TRANSPOSE CONCAT MATMUL Q8_0 Q4_K Q6_K SWIGLU ATTENTION TYPE_F16 RMS_NORM ROPE ROPE_SET_ROWS GET_ROWS SET_ROWS ARGMAX"
case ${VKRT_KERNEL_SUBSETS:-quick} in
  quick) kernels="MATMUL Q4_K Q6_K ATTENTION ROPE TYPE_F16" ;;
  all) kernels=$all ;;
  *) kernels=$VKRT_KERNEL_SUBSETS ;;  # e.g. "COPY SET_ROWS"
esac
for kernel in $kernels; do
  [[ " $all " == *" $kernel "* ]] || fail "no kernel $kernel (one of: $all)"
  sym=VKRT_KERNEL_$kernel
  [ "$kernel" = TYPE_F16 ] && sym=VKRT_TYPE_F16
  name=no-$(echo "$kernel" | tr 'A-Z_' 'a-z-')
  grep -v "$sym" "$ROOT/boards/sim-lavapipe-x2/defconfig" > "$SCRATCH/$name.frag"
  echo "# CONFIG_$sym is not set" >> "$SCRATCH/$name.frag"
  config_from "$name" "$SCRATCH/$name.frag"
  grep -q "^CONFIG_$sym=y" "$SCRATCH/$name.config" && fail "$sym did not turn off"
  filter=test_ops
  case $kernel in Q8_0|Q4_K|Q6_K|SWIGLU) filter=test_quant ;; ATTENTION) filter=test_attention ;; esac
  # the decode ops: the one compiled out answers UNSUPPORTED, the others still match the CPU
  case $kernel in RMS_NORM|ROPE|ROPE_SET_ROWS|GET_ROWS|SET_ROWS|ARGMAX) filter=test_decode_ops ;; TYPE_F16) filter="test_ops test_decode_ops" ;; esac
  # the library, the tools and the test programs that run (the SPIR-V from the suite's own
  # build folder: lib.sh)
  targets=(lib tools)
  for f in $filter; do targets+=("$SCRATCH/build-$name/tests/vk/$f"); done
  build_config "$name" "${targets[@]}" || { tail -30 "$SCRATCH/$name.log"; fail "$name does not build"; }
  for f in $filter; do
    VKRT_TEST_VALIDATION=0 VKRT_TEST_SYNC_PASS=0 VKRT_TEST_SCRIPTS=0 "$ROOT/tests/run" --builddir "$SCRATCH/build-$name" \
      --filter "vk/$f" > "$SCRATCH/$name.test.log" 2>&1 \
      || { tail -30 "$SCRATCH/$name.test.log"; fail "$name: $f fails"; }
  done
  echo "$name: builds; $(tail -1 "$SCRATCH/$name.test.log")"
  rm -rf "$SCRATCH/build-$name"
done
echo "kernel subsets: $(wc -w <<< "$kernels") of $(wc -w <<< "$all") kernels turned off one at a time (make test-matrix: all)"
