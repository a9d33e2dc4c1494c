#!/usr/bin/env bash
# Every board defconfig configures and builds (library, tools, tests) with -Wall -Wextra -Werror.
# The SPIR-V kernels come from the suite's build folder (lib.sh).
. "$(dirname "$0")/lib.sh"
# The board the suite's build folder was configured from is built already (make test builds it
# first, with -Werror): its folder stands in for it.
suite_config=""
[ -n "$SUITE_BUILD" ] && suite_config=$(sed -n 's/^config = //p' "$SUITE_BUILD/build.ninja" 2>/dev/null | sed 's/\$ / /g')
settings() { grep '^CONFIG_' "$1"; }
declare -A builds
for dir in "$ROOT"/boards/*/; do
  board=$(basename "$dir") build="$SCRATCH/build-board-$board"
  config_from "board-$board" "$dir/defconfig"
  if [ -f "$suite_config" ] && [ "$(settings "$suite_config")" = "$(settings "$SCRATCH/board-$board.config")" ]; then
    build=$SUITE_BUILD
    echo "board $board: builds (the suite's build folder, $SUITE_BUILD, is this board's)"
  else
    build_config "board-$board" || { tail -30 "$SCRATCH/board-$board.log"; fail "board $board does not build"; }
    echo "board $board: builds"
  fi
  grep -q -- "-Werror" "$build/build.ninja" || fail "$board: -Werror missing"
  builds[$board]=$build
done

# Boards that pick their devices by vendor id, run here: where no physical device has that
# vendor (lavapipe for the GPU boards), vkrt-probe must fail with the board mismatch naming
# the vendor asked for and what was found, once; where it opens, every device it opened must
# report that vendor. A board check skipped at open shows either way.
for dir in "$ROOT"/boards/*/; do
  board=$(basename "$dir") build=${builds[$(basename "$dir")]}
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
