#!/bin/sh
# Writes $2 with the source tree's version (git describe of $1, "unknown" outside git, or
# VKRT_VERSION when set) for vkrt_version(); leaves it untouched when unchanged, so Ninja's
# restat rebuilds nothing then.
v=${VKRT_VERSION:-$(git -C "$1" describe --always --dirty --tags 2>/dev/null || echo unknown)}
t="#define VKRT_BUILD_VERSION \"$v\""
[ -f "$2" ] && [ "$(cat "$2")" = "$t" ] && exit 0
mkdir -p "$(dirname "$2")" && echo "$t" > "$2"
