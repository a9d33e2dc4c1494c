#!/usr/bin/env bash
# Every board defconfig configures and builds (library, tools, tests) with -Wall -Wextra -Werror.
. "$(dirname "$0")/lib.sh"
for dir in "$ROOT"/boards/*/; do
  board=$(basename "$dir")
  config_from "board-$board" "$dir/defconfig"
  build_config "board-$board" || { tail -30 "$SCRATCH/board-$board.log"; fail "board $board does not build"; }
  grep -q -- "-Werror" "$SCRATCH/build-board-$board/build.ninja" || fail "$board: -Werror missing"
  echo "board $board: builds"
done
