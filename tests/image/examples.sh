#!/usr/bin/env bash
# The examples against an installed tree, as a user builds them: `make install
# PREFIX=/usr/local DESTDIR=<stage>`, then examples/ (as installed in share/vkrt/examples) built
# with nothing but `pkg-config --static` on the staged vkrt.pc, and run on the board.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${VKRT_BUILDDIR:-build}
case "$builddir" in /*) ;; *) builddir="$root/$builddir" ;; esac
unset MAKEFLAGS MFLAGS MAKELEVEL  # an outer `make test` must not leak its variables
stage=$(mktemp -d /tmp/vkrt-stage.XXXXXX)
trap 'rm -rf "$stage"' EXIT
# make install for the default build folder; another folder (its configuration may live
# elsewhere) through the script make install runs
if [ "$builddir" = "$root/build" ]; then
  make --no-print-directory -C "$root" install PREFIX=/usr/local DESTDIR="$stage"
else
  "$root/tools/install.sh" "$builddir" "$stage/usr/local"
fi
prefix=$stage/usr/local
for f in lib/libvkrt.a lib/pkgconfig/vkrt.pc include/vkrt/vkrt.h include/vkrt/status.h \
         share/vkrt/LICENSE share/vkrt/CHANGELOG.md share/vkrt/README.md share/vkrt/config \
         share/vkrt/examples/Makefile; do
  [ -f "$prefix/$f" ] || { echo "make install left no $f"; exit 1; }
done
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
echo "pkg-config --static --libs vkrt: $(pkg-config --static --libs vkrt)"
# The public header stands alone: every macro it brings into a user's file is VKRT_-prefixed
# (no IS_ENABLED, no CONFIG_ symbols of the build's config.h).
echo '#include <vkrt/vkrt.h>' > "$stage/h.c"
: > "$stage/empty.c"
macros() { cc -std=c11 -dM -E "$1" $(pkg-config --cflags vkrt) | awk '{print $2}' | sed 's/(.*//' | sort -u; }
leaked=$(comm -13 <(macros "$stage/empty.c") <(macros "$stage/h.c") | grep -v '^VKRT_' |
         grep -vE '^(_|__)|^(bool|true|false|NULL|offsetof|INT|UINT|SIZE_|PTRDIFF_|SIG_ATOMIC_|WCHAR_|WINT_)' || true)
[ -z "$leaked" ] || { echo "vkrt/vkrt.h defines macros without the VKRT_ prefix: $leaked"; exit 1; }
# ... and one layout for every configuration: nothing in it depends on a build's symbols
# (only the C++ guard is conditional).
conds=$(grep -nE '^[[:space:]]*#[[:space:]]*(if|ifdef|ifndef|elif)\b' "$prefix/include/vkrt/vkrt.h" \
          "$prefix/include/vkrt/status.h" | grep -vE '(__cplusplus|VKRT_[A-Z_]*_H)\b' || true)
[ -z "$conds" ] || { echo "vkrt/vkrt.h or status.h is conditional, so its layout can differ by build: $conds"; exit 1; }
echo "vkrt/vkrt.h: every macro it defines is VKRT_-prefixed (no IS_ENABLED, no CONFIG_*), nothing in it conditional on the build"
work=$stage/examples
cp -r "$prefix/share/vkrt/examples" "$work"
make --no-print-directory -C "$work" CFLAGS="-O1 -Wall -Wextra -Werror" > "$stage/make.log" 2>&1 ||
  { cat "$stage/make.log"; echo "the examples do not build against the installed tree"; exit 1; }
out=$("$work/hello") || { echo "$out"; echo "hello failed"; exit 1; }
grep -q "^hello: [0-9]* devices, transport " <<< "$out" || { echo "$out"; exit 1; }
echo "$(grep '^hello:' <<< "$out")"
if grep -q "^CONFIG_VKRT_KERNEL_MATMUL=y" "$prefix/share/vkrt/config" &&
   grep -q "^CONFIG_VKRT_COLLECTIVES=y" "$prefix/share/vkrt/config"; then
  out=$("$work/matmul_allreduce" 2>&1) || { echo "$out"; echo "matmul_allreduce failed"; exit 1; }
  grep -q "matches the CPU" <<< "$out" || { echo "$out"; exit 1; }
  echo "$out"
fi
out=$("$work/file_load" 2>&1) || { echo "$out"; echo "file_load failed"; exit 1; }
echo "$out"
echo "examples: built from the installed tree with pkg-config --static, all ran"
