#!/usr/bin/env bash
# Buildroot/NuttX habit: olddefconfig + savedefconfig on every board reproduces its defconfig.
. "$(dirname "$0")/lib.sh"
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
