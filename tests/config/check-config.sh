#!/usr/bin/env bash
# Buildroot/NuttX habit: olddefconfig + savedefconfig on every board reproduces its defconfig.
# The Kconfig house rules hold (selects only hidden helpers, board facts have no prompt), and
# the lint catches a transport that selects a prompted symbol (mutated copy of the tree).
. "$(dirname "$0")/lib.sh"
"${KTOOL[@]}" lint || exit 1
mut="$SCRATCH/lint-tree"
mkdir -p "$mut"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard -- Kconfig '*Kconfig' | xargs -0 cp --parents -t "$mut")
sed -i 's/^\tselect VKRT_DEVICE_REDUCE$/\tselect VKRT_KERNEL_MATMUL/' "$mut/Kconfig"
out=$(/usr/bin/python3 "$ROOT/tools/kconfig.py" --srcdir "$mut" lint 2>&1) && fail "lint accepted a select of a prompted symbol"
grep -q "selects VKRT_KERNEL_MATMUL, which has a prompt" <<< "$out" || fail "lint message: $out"
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
