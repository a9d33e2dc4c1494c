#!/usr/bin/env bash
# A shader whose push constants disagree with the host struct fails the build: copy the tree,
# add a member to the copy kernel's push block, rebuild, expect the _Static_assert message.
. "$(dirname "$0")/lib.sh"
tree="$SCRATCH/push-tree"
rm -rf "$tree"; mkdir -p "$tree"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$tree")
cp "$ROOT/boards/sim-lavapipe-x2/defconfig" "$tree/.config.in"
/usr/bin/python3 "$tree/scripts/kconfig.py" --srcdir "$tree" --config "$tree/.config" defconfig "$tree/.config.in" >/dev/null
grep -q "^} pc;" "$tree/kernels/copy.comp" || fail "copy.comp has no '} pc;' push block; update this test"
# The kernels of copy.comp are compiled in the copy; the others come from the suite's build
# folder (a folder of links to them: configure --kernels-from compiles what it lacks). Built:
# the copy kernels and runtime/ops/copy.c, whose _Static_asserts hold the host structs to
# the reflected sizes.
kdir="$SCRATCH/push-kernels"
mkdir -p "$kdir/gen/kernels" "$kdir/gen/vkrt_kernels"
from_copy=" $(sed -n 's/^kernel-[^+]*+= *\([a-z0-9_]*\) *: *copy\.comp *:.*/\1/p' "$ROOT/kernels/Sources" | tr '\n' ' ')"
[ "$from_copy" != " " ] || fail "kernels/Sources lists no kernel of copy.comp; update this test"
if [ -n "$SUITE_BUILD" ]; then
  for c in "$SUITE_BUILD"/gen/kernels/*.c; do
    name=$(basename "$c" .c)
    [ "$name" = registry ] && continue
    [[ "$from_copy" == *" $name "* ]] && continue
    ln -s "$c" "$kdir/gen/kernels/" && ln -s "$SUITE_BUILD/gen/vkrt_kernels/$name.h" "$kdir/gen/vkrt_kernels/"
  done
fi
obj="$tree/build/obj/runtime/ops/copy.o"
# Control: the unmodified copy builds the copy kernels' host code.
(cd "$tree" && ./configure --builddir "$tree/build" --kernels-from "$kdir" >/dev/null && ninja -C "$tree/build" "$obj") \
  > "$SCRATCH/push-ok.log" 2>&1 || { tail -20 "$SCRATCH/push-ok.log"; fail "unmodified tree does not build"; }
sed -i '0,/^} pc;/s//  uint extra_member_the_host_does_not_know;\n} pc;/' "$tree/kernels/copy.comp"
if (cd "$tree" && ninja -C "$tree/build" "$obj") > "$SCRATCH/push-bad.log" 2>&1; then
  fail "build succeeded although shader and host push constants disagree"
fi
grep -q "disagree with kernel" "$SCRATCH/push-bad.log" || { tail -20 "$SCRATCH/push-bad.log"; fail "failure is not the push-constant assertion"; }
echo "push-mismatch: build fails with: $(grep -m1 -o 'push constants of.*' "$SCRATCH/push-bad.log")"
