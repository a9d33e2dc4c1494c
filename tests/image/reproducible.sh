#!/usr/bin/env bash
# Two image builds from clean copies of the tree (in different folders) are byte-identical.
# The first compiles everything; the second takes the SPIR-V kernels the suite's build folder
# compiled (a third path) and compiles the C code itself.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
suite=${VKRT_BUILDDIR:-build}
case "$suite" in /*) ;; *) suite="$root/$suite" ;; esac
[ -d "$suite/gen/kernels" ] || suite=""
work=$(mktemp -d /tmp/vkrt-repro.XXXXXX)
trap 'rm -rf "$work"' EXIT
version=$(git -C "$root" describe --always --dirty --tags 2>/dev/null || echo unknown)
epoch=$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)
for copy in a b-longer-path; do
  mkdir -p "$work/$copy"
  (cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/$copy")
  /usr/bin/python3 "$work/$copy/scripts/kconfig.py" --srcdir "$work/$copy" --config "$work/$copy/.config" \
    defconfig "$work/$copy/boards/sim-lavapipe-x2/defconfig" >/dev/null
  start=$SECONDS
  # what the image holds: the library and the tools
  from=""
  [ $copy = a ] || from=$suite
  (cd "$work/$copy" && ./configure ${from:+--kernels-from "$from"} >/dev/null && ninja -C build lib tools >/dev/null &&
   VKRT_VERSION=$version SOURCE_DATE_EPOCH=$epoch tools/make-image.sh build >/dev/null)
  echo "image built in a clean copy at $copy/ ($((SECONDS - start)) s)"
done
a=$(ls "$work"/a/build/vkrt-*.tar.gz) b=$(ls "$work"/b-longer-path/build/vkrt-*.tar.gz)
if ! cmp "$a" "$b"; then
  mkdir -p "$work/x" "$work/y"; tar -xzf "$a" -C "$work/x"; tar -xzf "$b" -C "$work/y"
  diff -r "$work/x" "$work/y" | head; exit 1
fi
echo "reproducible: $(basename "$a") identical from two clean trees ($(sha256sum "$a" | cut -c1-16))"
