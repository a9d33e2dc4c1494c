#!/usr/bin/env bash
# Buildroot/NuttX habit: olddefconfig + savedefconfig on every board reproduces its defconfig.
# The Kconfig house rules hold (selects only hidden helpers, board facts have no prompt), and
# the lint catches a transport that selects a prompted symbol (mutated copy of the tree).
# In a copy of the tree's configuration files: `make savedefconfig` without O= writes
# build/defconfig and leaves no file in the tree, and `make <name>_defconfig` for a board that
# does not exist says so and lists the boards (with O= when given).
. "$(dirname "$0")/lib.sh"
"${KTOOL[@]}" lint || exit 1
mut="$SCRATCH/lint-tree"
mkdir -p "$mut"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard -- Kconfig '*Kconfig' | xargs -0 cp --parents -t "$mut")
sed -i 's/^\tselect VKRT_DEVICE_REDUCE$/\tselect VKRT_KERNEL_MATMUL/' "$mut/Kconfig"
out=$(/usr/bin/python3 "$ROOT/scripts/kconfig.py" --srcdir "$mut" lint 2>&1) && fail "lint accepted a select of a prompted symbol"
grep -q "selects VKRT_KERNEL_MATMUL, which has a prompt" <<< "$out" || fail "lint message: $out"
tree="$SCRATCH/make-tree"
mkdir -p "$tree/build"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard -- Makefile Kconfig '*Kconfig' boards scripts |
   xargs -0 cp --parents -t "$tree")
touch "$tree/build/.deps-ok" "$SCRATCH/make-tree.stamp"  # the packages are there: make test runs
unset MAKEFLAGS MFLAGS MAKELEVEL
make -s -C "$tree" sim-lavapipe-x4_defconfig > "$SCRATCH/make-tree.log" 2>&1 &&
  make -s -C "$tree" savedefconfig >> "$SCRATCH/make-tree.log" 2>&1 ||
  { cat "$SCRATCH/make-tree.log"; fail "make sim-lavapipe-x4_defconfig + savedefconfig"; }
diff -u "$ROOT/boards/sim-lavapipe-x4/defconfig" "$tree/build/defconfig" ||
  fail "make savedefconfig did not write the board's defconfig to build/defconfig"
left=$(cd "$tree" && find . -newer "$SCRATCH/make-tree.stamp" -type f ! -path './build/*' ! -name .config ! -name .config.old)
[ -z "$left" ] || fail "make savedefconfig left files in the tree: $left"
for o in "" "O=$SCRATCH/nb"; do
  out=$(make -s -C "$tree" $o nosuchboard_defconfig 2>&1) && fail "make $o nosuchboard_defconfig succeeded"
  grep -q "no board 'nosuchboard': boards/nosuchboard/defconfig does not exist" <<< "$out" &&
    grep -q "^  make ${o:+$o }sim-lavapipe-x2_defconfig$" <<< "$out" || fail "make $o nosuchboard_defconfig: $out"
done
[ ! -e "$SCRATCH/nb" ] || fail "make O=... nosuchboard_defconfig made the build folder"
echo "make savedefconfig: build/defconfig, nothing left in the tree; make nosuchboard_defconfig: no board 'nosuchboard', the boards listed"
rc=0
for dir in "$ROOT"/boards/*/; do
  board=$(basename "$dir")
  cfg="$SCRATCH/check-$board.config"
  "${KTOOL[@]}" --config "$cfg" defconfig "$dir/defconfig" >/dev/null || { echo "$board: defconfig fails"; rc=1; continue; }
  "${KTOOL[@]}" --config "$cfg" olddefconfig >/dev/null
  "${KTOOL[@]}" --config "$cfg" savedefconfig "$SCRATCH/check-$board.defconfig" >/dev/null
  if diff -u "$dir/defconfig" "$SCRATCH/check-$board.defconfig"; then
    echo "$board: defconfig unchanged"
  else
    echo "$board: defconfig is not savedefconfig output (diff above)"; rc=1
  fi
done
exit $rc
