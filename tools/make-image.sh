#!/usr/bin/env bash
# `make image`: build/image/ (the tree tools/install.sh lays out: library, headers with config.h,
# pkg-config file, tools, LICENSE, docs, boards, examples, the exact .config, the board README)
# plus a manifest with every file's SHA-256, and a reproducible
# build/vkrt-<board>-<version>.tar.gz that unpacks into vkrt-<board>-<version>/.
set -euo pipefail
builddir=$(cd "${1:-build}" && pwd)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
config=$(sed -n 's/^config = //p' "$builddir/build.ninja" | sed 's/\$ / /g')
board=$(sed -n 's/^CONFIG_VKRT_BOARD="\(.*\)"/\1/p' "$config")
version=${VKRT_VERSION:-$(git -C "$srcdir" describe --always --dirty --tags 2>/dev/null || echo unknown)}
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$srcdir" log -1 --format=%ct 2>/dev/null || echo 0)}
img="$builddir/image"
rm -rf "$img"
VKRT_VERSION=$version "$srcdir/tools/install.sh" "$builddir" "$img" > /dev/null
y() { grep -q "^CONFIG_$1=y" "$config"; }
list() { local out=""; for s in "$@"; do y "$s" && out="$out ${s#VKRT_}"; done; echo "${out# }"; }
policy=$(grep -o '^CONFIG_VKRT_IMPORT_POLICY_[A-Z_]*=y' "$config" | sed 's/CONFIG_VKRT_IMPORT_POLICY_//; s/=y//' | grep -v '^ID' | tr 'A-Z_' 'a-z-')
{
  echo "board: $board"
  echo "version: $version"
  echo "transports: $(list VKRT_TRANSPORT_NATIVE_FD VKRT_TRANSPORT_CPU_PROXY VKRT_TRANSPORT_HOST_STAGED VKRT_TRANSPORT_MPI | tr 'A-Z_' 'a-z_' | sed 's/transport_//g')"
  echo "import-policy: $policy"
  echo "kernels: $(list VKRT_KERNEL_COPY VKRT_KERNEL_TRANSPOSE VKRT_KERNEL_CONCAT VKRT_CONCAT_TRANSPOSED_FAST_PATH VKRT_KERNEL_REDUCE VKRT_KERNEL_MATMUL VKRT_TYPE_F16 | tr 'A-Z_' 'a-z_' | sed 's/kernel_//g')"
  echo "files:"
  (cd "$img" && find . -type f ! -name MANIFEST | LC_ALL=C sort | sed 's|^\./||' | xargs sha256sum)
} > "$img/MANIFEST"
tarball="$builddir/vkrt-$board-$version.tar.gz"
find "$img" -exec touch -h -d "@$epoch" {} +
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=gnu \
    --mode='u+rwX,go+rX,go-w' --transform "s|^image|vkrt-$board-$version|" \
    -C "$builddir" -cf - image | gzip -9n > "$tarball"
echo "image: $img"
echo "tarball: $tarball ($(stat -c %s "$tarball") bytes, sha256 $(sha256sum "$tarball" | cut -c1-16)...)"
