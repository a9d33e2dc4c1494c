#!/usr/bin/env bash
# Pruning is real: a transport or kernel that is n leaves no object and no symbol in libvkrt.a.
. "$(dirname "$0")/lib.sh"
frag="$SCRATCH/prune.frag"
grep -v "VKRT_TRANSPORT_NATIVE_FD\|VKRT_KERNEL_TRANSPOSE" "$ROOT/boards/sim-lavapipe-x2/defconfig" > "$frag"
cat >> "$frag" <<'EOC'
# CONFIG_VKRT_TRANSPORT_NATIVE_FD is not set
# CONFIG_VKRT_KERNEL_TRANSPOSE is not set
EOC
config_from prune "$frag"
build_config prune build-prune-lib 2>/dev/null || build_config prune || { tail -30 "$SCRATCH/prune.log"; fail "pruned config does not build"; }
lib="$SCRATCH/build-prune/libvkrt.a"
objs=$(ar t "$lib")
syms=$(nm -A "$lib" 2>/dev/null)
grep -qi "native_fd" <<< "$objs" && fail "native_fd object still in libvkrt.a"
grep -qi "native_fd" <<< "$syms" && fail "native_fd symbol still in libvkrt.a"
grep -qi "transpose" <<< "$objs" && fail "transpose object still in libvkrt.a"
grep -q "vkrt_kernel_transpose" <<< "$syms" && fail "transpose kernel still embedded"
# ... while the enabled ones are there (so the test can fail the other way too).
config_from full "$ROOT/boards/sim-lavapipe-x2/defconfig"
build_config full || fail "default board does not build"
full=$(nm -A "$SCRATCH/build-full/libvkrt.a" 2>/dev/null)
grep -qi "native_fd" <<< "$full" || fail "native_fd missing from the full build (test is blind)"
grep -q "vkrt_kernel_transpose" <<< "$full" || fail "transpose missing from the full build (test is blind)"
# The multi-host transport: absent from the default board, present on the MPI board.
grep -q "^mpi\.o$" <<< "$objs" && fail "mpi object in libvkrt.a without CONFIG_VKRT_TRANSPORT_MPI"
grep -q "vkrt_interhost" <<< "$syms$full" && fail "vkrt_interhost symbol without CONFIG_VKRT_TRANSPORT_MPI"
if pkg-config --exists ompi-c; then
  config_from mpi "$ROOT/boards/sim-lavapipe-2x2-mpi/defconfig"
  build_config mpi lib || { tail -30 "$SCRATCH/mpi.log"; fail "MPI board library does not build"; }
  mpi=$(nm -A "$SCRATCH/build-mpi/libvkrt.a" 2>/dev/null)
  grep -q "T vkrt_interhost_allreduce" <<< "$mpi" || fail "vkrt_interhost_allreduce missing from the MPI board (test is blind)"
  echo "pruning: the MPI transport absent when n, present when y"
fi
echo "pruning: native_fd and transpose absent when n, present when y"
