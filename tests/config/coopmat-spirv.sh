#!/usr/bin/env bash
# The cooperative-matrix tiled matmul kernels run on no device here (lavapipe lacks
# VK_NV_cooperative_matrix), so check what can be checked without one: each built *_cm kernel
# is SPIR-V with the CooperativeMatrixNV capability, and stays valid (spirv-val, Vulkan 1.2)
# with its specialization constants frozen at the tiles the ops choose and the ones the bench
# sweeps (0 workgroup size, 1 BM, 2 BN, 3 subgroups along m, 4 BK, 5 shared-memory buffers).
. "$(dirname "$0")/lib.sh"
builddir=${VKRT_BUILDDIR:-$ROOT/build}
case "$builddir" in /*) ;; *) builddir="$ROOT/$builddir" ;; esac
shopt -s nullglob
kernels=("$builddir"/kernels/matmul_*_cm.spv)
if [ ${#kernels[@]} = 0 ]; then
  echo "coopmat-spirv: no cooperative-matrix kernels in this build (CONFIG_VKRT_KERNEL_MATMUL_COOPMAT=n)"
  exit 77
fi
tiles=("64 32 16 1 64 1" "256 128 32 2 128 1" "256 128 32 2 64 1" "512 256 128 4 32 1" "128 128 128 2 32 1" "128 128 128 2 32 2"
       "256 128 128 2 32 2" "256 256 128 2 32 1" "32 16 16 1 128 1" "64 32 16 1 128 2"
       "128 64 128 2 32 2" "64 32 32 2 128 1")
for spv in "${kernels[@]}"; do
  spirv-dis "$spv" -o "$SCRATCH/dis.txt"
  grep -q "OpCapability CooperativeMatrixNV" "$SCRATCH/dis.txt" || fail "$spv: no CooperativeMatrixNV capability"
  spirv-val --target-env vulkan1.2 "$spv" || fail "$spv: spirv-val"
  for t in "${tiles[@]}"; do
    set -- $t
    spirv-opt --set-spec-const-default-value "0:$1 1:$2 2:$3 3:$4 4:$5 5:$6" --freeze-spec-const "$spv" -o "$SCRATCH/frozen.spv" \
      || fail "$spv: spirv-opt at tile $t"
    spirv-val --target-env vulkan1.2 "$SCRATCH/frozen.spv" || fail "$spv: not valid at tile wg/bm/bn/rm/bk/stages $t"
  done
done
echo "coopmat-spirv: ${#kernels[@]} cooperative-matrix kernels valid at ${#tiles[@]} tiles each"
