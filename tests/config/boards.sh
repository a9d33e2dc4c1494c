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
