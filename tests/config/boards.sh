#!/usr/bin/env bash
# Every board defconfig configures and builds (library, tools, tests) with -Wall -Wextra -Werror.
# The first board compiles the SPIR-V kernels; the others take them from the folder with the
# most kernels so far (the shaders do not depend on the configuration).
. "$(dirname "$0")/lib.sh"
src="" best=0
for dir in "$ROOT"/boards/*/; do
  board=$(basename "$dir") build="$SCRATCH/build-board-$board"
  config_from "board-$board" "$dir/defconfig"
  if [ -n "$src" ] && KERNELS_FROM=$src build_config "board-$board"; then
    :
  elif [ -n "$src" ] && ! grep -q "was not generated there" "$SCRATCH/board-$board.log"; then
    tail -30 "$SCRATCH/board-$board.log"; fail "board $board does not build"
  else  # first board, or one with a kernel the source folder lacks: compile its own
    build_config "board-$board" || { tail -30 "$SCRATCH/board-$board.log"; fail "board $board does not build"; }
  fi
  grep -q -- "-Werror" "$build/build.ninja" || fail "$board: -Werror missing"
  echo "board $board: builds"
  n=$(find "$build/gen/kernels" -name '*.c' 2>/dev/null | wc -l)
  if [ "$n" -gt "$best" ]; then src=$build best=$n; fi
done

# Boards that pick their devices by vendor id, run here: where no physical device has that
# vendor (lavapipe for the GPU boards), vkrt-probe must fail with the board mismatch naming
# the vendor asked for and what was found, once; where it opens, every device it opened must
# report that vendor. A board check skipped at open shows either way.
for dir in "$ROOT"/boards/*/; do
  board=$(basename "$dir") build="$SCRATCH/build-board-$board"
  vendor=$(sed -n 's/^CONFIG_VKRT_DEVICE_VENDOR_ID=//p' "$SCRATCH/board-$board.config")
  [ -n "$vendor" ] || continue
  vendor=$(printf '0x%x' "$vendor")
  if out=$("$build/bin/vkrt-probe" 2>&1); then
    others=$(grep -o '(vendor 0x[0-9a-f]*' <<< "$out" | grep -v "(vendor $vendor\$" || true)
    [ -z "$others" ] || { echo "$out"; fail "$board asks for vendor $vendor but opened: $others"; }
    echo "board $board: opens here (vendor $vendor present)"
  else
    grep -q "VKRT_ERROR_BOARD_MISMATCH" <<< "$out" && grep -q "with vendor $vendor" <<< "$out" &&
      grep -q "physical device(s): \[0\]" <<< "$out" ||
      { echo "$out"; fail "$board: vkrt-probe failed without the board mismatch for vendor $vendor"; }
    [ "$(grep -c "expects .* with vendor $vendor" <<< "$out")" = 1 ] ||
      { echo "$out"; fail "$board: vkrt-probe printed the board mismatch more than once"; }
    echo "board $board: refused here: $(tail -1 <<< "$out")"
  fi
done
