#!/usr/bin/env bash
# Pruning is real, and `make O=dir` keeps dir's own configuration: `make O=dir
# nvidia-h200-x1_defconfig && make O=dir` builds native_fd, transpose and the Q6_K kernels in;
# turning them off in dir/.config, then `make O=dir olddefconfig && make O=dir`, leaves no
# object and no symbol of any in dir/libvkrt.a (get_rows_q6_k stays: the row gather's). A second folder keeps its own board, the source tree's .config is
# never touched, and a folder without .config says what to run.
. "$(dirname "$0")/lib.sh"
unset MAKEFLAGS MFLAGS MAKELEVEL  # an outer `make O=... test` must not leak its variables
# The builds through ccache, with the suite's SPIR-V kernels (lib.sh): what is tested is the
# configuration per folder and what the library then holds, not the shader compiler.
mk() {
  CC="$TEST_CC" CCACHE_BASEDIR=/ CCACHE_NOHASHDIR=1 \
    make --no-print-directory -C "$ROOT" ${SUITE_BUILD:+KERNELS_FROM="$SUITE_BUILD"} "$@"
}
tree_config() { [ -f "$ROOT/.config" ] && sha256sum < "$ROOT/.config" || echo none; }
before=$(tree_config)
a="$SCRATCH/a" b="$SCRATCH/b"

out=$(mk O="$SCRATCH/none" 2>&1) && fail "make O=<folder without .config> succeeded: $out"
grep -q "make O=$SCRATCH/none <board>_defconfig" <<< "$out" || fail "no hint what to run: $out"

mk O="$a" nvidia-h200-x1_defconfig > "$SCRATCH/a.log" 2>&1 || { cat "$SCRATCH/a.log"; fail "make O=a nvidia-h200-x1_defconfig"; }
mk O="$b" sim-lavapipe-x4_defconfig > "$SCRATCH/b.log" 2>&1 || { cat "$SCRATCH/b.log"; fail "make O=b sim-lavapipe-x4_defconfig"; }
mk O="$a" >> "$SCRATCH/a.log" 2>&1 || { tail -30 "$SCRATCH/a.log"; fail "make O=a does not build"; }
grep -qxF "config = $a/.config" "$a/build.ninja" || fail "$a/build.ninja is not configured from $a/.config"
grep -q '^CONFIG_VKRT_BOARD="nvidia-h200-x1"' "$a/.config" || fail "$a/.config is not nvidia-h200-x1"
grep -q '^CONFIG_VKRT_BOARD="sim-lavapipe-x4"' "$b/.config" || fail "$b/.config is not sim-lavapipe-x4"
mk O="$b" savedefconfig > /dev/null && diff -u "$ROOT/boards/sim-lavapipe-x4/defconfig" "$b/defconfig" \
  || fail "make O=b savedefconfig does not reproduce the board defconfig in $b/defconfig"
# Control: the enabled ones are there (so the test can fail the other way too).
full=$(nm -A "$a/libvkrt.a" 2>/dev/null)
grep -qi "native_fd" <<< "$(ar t "$a/libvkrt.a")" || fail "native_fd object missing from the full build (test is blind)"
grep -qi "native_fd" <<< "$full" || fail "native_fd missing from the full build (test is blind)"
grep -q "vkrt_kernel_transpose" <<< "$full" || fail "transpose missing from the full build (test is blind)"
q6k_kernels="vkrt_kernel_\(matvec\|matmul\|dequant\)_q6_k"
grep -q "$q6k_kernels" <<< "$full" || fail "Q6_K kernels missing from the full build (test is blind)"

sed -i 's/^CONFIG_VKRT_TRANSPORT_NATIVE_FD=y/# CONFIG_VKRT_TRANSPORT_NATIVE_FD is not set/;
        s/^CONFIG_VKRT_KERNEL_TRANSPOSE=y/# CONFIG_VKRT_KERNEL_TRANSPOSE is not set/;
        s/^CONFIG_VKRT_KERNEL_Q6_K=y/# CONFIG_VKRT_KERNEL_Q6_K is not set/' "$a/.config"
mk O="$a" olddefconfig >> "$SCRATCH/a.log" 2>&1 || fail "make O=a olddefconfig"
mk O="$a" >> "$SCRATCH/a.log" 2>&1 || { tail -30 "$SCRATCH/a.log"; fail "pruned config does not build"; }
grep -q "^CONFIG_VKRT_TRANSPORT_NATIVE_FD=y" "$a/.config" && fail "native_fd came back in $a/.config"
objs=$(ar t "$a/libvkrt.a")
syms=$(nm -A "$a/libvkrt.a" 2>/dev/null)
grep -qi "native_fd" <<< "$objs" && fail "native_fd object still in libvkrt.a"
grep -qi "native_fd" <<< "$syms" && fail "native_fd symbol still in libvkrt.a"
grep -qi "transpose" <<< "$objs" && fail "transpose object still in libvkrt.a"
grep -q "vkrt_kernel_transpose" <<< "$syms" && fail "transpose kernel still embedded"
grep -q "$q6k_kernels" <<< "$syms" && fail "Q6_K kernels still embedded with CONFIG_VKRT_KERNEL_Q6_K=n"
grep -q "vkrt_kernel_get_rows_q6_k" <<< "$syms" || fail "the row gather lost its q6_K table kernel"
# The multi-host transport: absent from a board without it, present on the MPI board.
grep -q "^mpi\.o$" <<< "$objs" && fail "mpi object in libvkrt.a without CONFIG_VKRT_TRANSPORT_MPI"
grep -q "vkrt_interhost" <<< "$syms$full" && fail "vkrt_interhost symbol without CONFIG_VKRT_TRANSPORT_MPI"
if pkg-config --exists ompi-c; then
  config_from mpi "$ROOT/boards/sim-lavapipe-2x2-mpi/defconfig"
  build_config mpi lib || { tail -30 "$SCRATCH/mpi.log"; fail "MPI board library does not build"; }
  mpi=$(nm -A "$SCRATCH/build-mpi/libvkrt.a" 2>/dev/null)
  grep -q "T vkrt_interhost_allreduce" <<< "$mpi" || fail "vkrt_interhost_allreduce missing from the MPI board (test is blind)"
  echo "pruning: the MPI transport absent when n, present when y"
fi
[ "$(tree_config)" = "$before" ] || fail "the source tree's .config changed"
echo "pruning: native_fd, transpose and the Q6_K kernels absent when n, present when y (make O=dir, own .config per folder)"
