#!/usr/bin/env bash
# An appliance board's image carries the runtime without the lab: nvidia-h200-x1 (whose
# defconfig leaves CONFIG_VKRT_LAB unset) built and laid out by tools/make-image.sh has no
# vkrt_lab.h, no lab object or symbol in libvkrt.a (nm: nothing matching tuning, lab_ or
# test_limits, the ops' limit overrides the lab sets), no forcing-only kernel embedded, and a
# vkrt-bench without the lab's commands that says so. The
# same checks pass the other way on a build with the lab (the test's build folder when it has
# it, else the board plus boards/lab.config), so the test is not blind.
. "$(dirname "$0")/../config/lib.sh"
builddir=${VKRT_BUILDDIR:-build}
case "$builddir" in /*) ;; *) builddir="$ROOT/$builddir" ;; esac
board=nvidia-h200-x1
# the forcing-only kernels (kernels/Sources, CONFIG_VKRT_LAB_KERNEL_VARIANTS): two of them
forced_only='vkrt_kernel_transpose_f32_plain|vkrt_kernel_matvec_q8_0_vec16_r4'

lab_symbols() { nm "$1" 2>/dev/null | grep -i -E 'tuning|lab_|test_limits' || true; }

# build <name> <config>: library, headers and vkrt-bench of <config> in $SCRATCH/build-<name>,
# then its image; the SPIR-V comes from the test's build folder (lib.sh).
build() {
  local name=$1 dir="$SCRATCH/build-$1"
  build_config "$name" lib "$dir/bin/vkrt-bench" || { tail -30 "$SCRATCH/$name.log"; fail "$name does not build"; }
  VKRT_VERSION=test SOURCE_DATE_EPOCH=0 "$ROOT/tools/make-image.sh" "$dir" > /dev/null ||
    fail "make-image.sh $name"
}

config_from app "$ROOT/boards/$board/defconfig"
grep -qx '# CONFIG_VKRT_LAB is not set' "$SCRATCH/app.config" ||
  fail "boards/$board/defconfig turns the lab on: an appliance image would carry it"
build app
app="$SCRATCH/build-app"
[ -f "$app/image/lib/libvkrt.a" ] || fail "the image has no lib/libvkrt.a"
[ -e "$app/image/include/vkrt/vkrt.h" ] || fail "the image has no include/vkrt/vkrt.h"
found=$(cd "$app/image" && find . -name 'vkrt_lab.h')
[ -z "$found" ] || fail "the $board image contains $found"
grep -q 'vkrt_lab\.h' "$app/image/MANIFEST" && fail "the $board image's MANIFEST lists vkrt_lab.h"
syms=$(lab_symbols "$app/image/lib/libvkrt.a")
[ -z "$syms" ] || fail "lab symbols in the $board image's libvkrt.a: $(echo $syms | head -c 400)"
objs=$(ar t "$app/image/lib/libvkrt.a")
grep -qx -E '(lab|knobs|timer|raw|handover|host)\.o' <<< "$objs" &&
  fail "a runtime/lab object in the $board libvkrt.a: $(grep -x -E '(lab|knobs|timer|raw|handover|host)\.o' <<< "$objs" | tr '\n' ' ')"
appsyms=$(nm "$app/image/lib/libvkrt.a" 2>/dev/null)
grep -q -E "$forced_only" <<< "$appsyms" &&
  fail "a forcing-only kernel is embedded in the $board libvkrt.a"
[ -z "$(lab_symbols "$app/bin/vkrt-bench")" ] || fail "lab symbols in the $board vkrt-bench"
out=$("$app/bin/vkrt-bench" quant 2>&1) && fail "vkrt-bench quant ran without the lab: $out"
grep -q "needs the lab" <<< "$out" || fail "vkrt-bench quant without the lab says: $out"
help=$("$app/bin/vkrt-bench" --help)
grep -q '^  upload ' <<< "$help" || fail "vkrt-bench lost its upload command"
echo "$board image: no vkrt_lab.h, no lab object, symbol or forcing-only kernel; vkrt-bench says what needs the lab"

# The control: a build with the lab has all of it.
if grep -q '^#define CONFIG_VKRT_LAB_KERNEL_VARIANTS 1$' "$builddir/include/vkrt/config.h" 2>/dev/null &&
   [ -f "$builddir/libvkrt.a" ] && [ -x "$builddir/bin/vkrt-bench" ]; then
  lab="$SCRATCH/control"
  "$ROOT/tools/install.sh" "$builddir" "$lab" > /dev/null
  labbench=$builddir/bin/vkrt-bench
else
  cp "$SCRATCH/app.config" "$SCRATCH/lab.config"
  "${KTOOL[@]}" --config "$SCRATCH/lab.config" merge "$ROOT/boards/lab.config" > /dev/null
  build lab
  lab="$SCRATCH/build-lab/image"
  labbench=$SCRATCH/build-lab/bin/vkrt-bench
fi
[ -f "$lab/include/vkrt/vkrt_lab.h" ] || fail "a build with the lab installs no vkrt_lab.h (test is blind)"
labsyms=$(nm "$lab/lib/libvkrt.a" 2>/dev/null)
grep -q ' T vkrt_lab_set$' <<< "$labsyms" || fail "no vkrt_lab_set in a build with the lab (test is blind)"
grep -q ' T vkrt_ops_test_limits$' <<< "$labsyms" || fail "no vkrt_ops_test_limits in a build with the lab (test is blind)"
grep -q -E "$forced_only" <<< "$labsyms" || fail "no forcing-only kernel in a build with the lab (test is blind)"
help=$("$labbench" --help)
grep -q '^  quant ' <<< "$help" || fail "vkrt-bench with the lab has no quant command (test is blind)"
echo "control: a build with the lab installs vkrt_lab.h and has its symbols, kernels and commands"
