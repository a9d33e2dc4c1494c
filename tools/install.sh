#!/usr/bin/env bash
# Lays out one build as an installed tree: `make install` (into $(DESTDIR)$(PREFIX)) and
# `make image` (into <builddir>/image) both use it.
#   tools/install.sh <builddir> <root>
#   <root>/lib/libvkrt.a            the static library (the only form: see README "Linking")
#   <root>/lib/pkgconfig/vkrt.pc    relocatable (prefix from the .pc file's own folder), so the
#                                   tree works wherever it is unpacked or staged
#   <root>/include/vkrt/*.h         the public headers; config.h is this build's configuration
#                                   (vkrt_lab.h only with CONFIG_VKRT_LAB)
#   <root>/bin/                     vkrt-probe, vkrt-bench, vkrt-service (those configured)
#   <root>/share/vkrt/              LICENSE, README.md, CHANGELOG.md, docs/, boards/, examples/,
#                                   config (this build's .config), README.board.md
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: tools/install.sh <builddir> <root>" >&2; exit 2; }
builddir=$(cd "$1" && pwd)
root=$2
srcdir=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$builddir/libvkrt.a" ] || { echo "$builddir/libvkrt.a missing: run make first" >&2; exit 1; }
config=$(sed -n 's/^config = //p' "$builddir/build.ninja" | sed 's/\$ / /g')
board=$(sed -n 's/^CONFIG_VKRT_BOARD="\(.*\)"/\1/p' "$config")
version=${VKRT_VERSION:-$(git -C "$srcdir" describe --always --dirty --tags 2>/dev/null || echo unknown)}
# what the build was configured with (config.h: a .config written before a symbol existed does
# not name it, configure gave it its default)
y() { grep -q "^#define CONFIG_$1 1$" "$builddir/include/vkrt/config.h"; }

mkdir -p "$root/lib/pkgconfig" "$root/include/vkrt" "$root/bin" "$root/share/vkrt"
install -m 644 "$builddir/libvkrt.a" "$root/lib/"
# the build's copies of the source tree's public headers (not whatever else an older build left
# in the folder) and its config.h
for h in "$srcdir"/runtime/include/vkrt/*.h config.h; do
  install -m 644 "$builddir/include/vkrt/$(basename "$h")" "$root/include/vkrt/"
done
# vkrt_mpi.h (the only header that includes mpi.h) only with the MPI transport, vkrt_lab.h
# only with the lab (an appliance image has neither its header nor its functions)
y VKRT_TRANSPORT_MPI || rm -f "$root/include/vkrt/vkrt_mpi.h"
y VKRT_LAB || rm -f "$root/include/vkrt/vkrt_lab.h"
for t in vkrt-probe vkrt-bench vkrt-service; do
  [ -x "$builddir/bin/$t" ] && install -m 755 "$builddir/bin/$t" "$root/bin/"
done
share=$root/share/vkrt
install -m 644 "$config" "$share/config"
install -m 644 "$srcdir/LICENSE" "$srcdir/README.md" "$srcdir/CHANGELOG.md" "$share/"
[ -f "$srcdir/boards/$board/README.md" ] && install -m 644 "$srcdir/boards/$board/README.md" "$share/README.board.md"
# docs, boards and examples as the source tree tracks them (no build outputs)
(cd "$srcdir" && git ls-files -z --cached --others --exclude-standard -- docs boards examples 2>/dev/null ||
   find docs boards examples -type f -print0) |
  (cd "$srcdir" && xargs -0 -r cp --parents -t "$share")

# Static linking needs what libvkrt.a uses: the Vulkan loader (unless it is dlopen()ed at run
# time), Open MPI for the multi-host transport (vkrt/vkrt_mpi.h includes mpi.h, so its Cflags
# come along through Requires.private), libdl, pthreads, libm.
libs_private="-ldl -lpthread -lm" requires_private="" cflags='-I${includedir}'
y VKRT_LOADER_DLOPEN || requires_private="vulkan"
if y VKRT_TRANSPORT_MPI; then
  if pkg-config --exists ompi-c; then
    requires_private="${requires_private:+$requires_private, }ompi-c"
  else
    cflags="$cflags $(mpicc --showme:compile)"
    libs_private="$(mpicc --showme:link) $libs_private"
  fi
fi
cat > "$root/lib/pkgconfig/vkrt.pc" <<EOPC
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: vkrt
Description: libvkrt static Vulkan runtime for the $board appliance
Version: $version
Cflags: $cflags
Libs: -L\${libdir} -lvkrt
Libs.private: $libs_private
${requires_private:+Requires.private: $requires_private}
EOPC
echo "installed $board $version into $root"
