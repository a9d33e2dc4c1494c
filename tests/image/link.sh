#!/usr/bin/env bash
# The image stands alone: unpack it, build a small program outside the tree with nothing but
# `pkg-config --static --cflags --libs vkrt`, run it on lavapipe; check the manifest hashes.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${VKRT_BUILDDIR:-build}
case "$builddir" in /*) ;; *) builddir="$root/$builddir" ;; esac
out=$("$root/tools/make-image.sh" "$builddir")
tarball=$(echo "$out" | sed -n 's/^tarball: \([^ ]*\) .*/\1/p')
work=$(mktemp -d /tmp/vkrt-link.XXXXXX)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
# one top folder named like the tarball: vkrt-<board>-<version>/
top=$(basename "$tarball" .tar.gz)
[ "$(ls "$work")" = "$top" ] || { echo "the tarball unpacks into '$(ls "$work" | tr '\n' ' ')', not $top/"; exit 1; }
img=$work/$top
(cd "$img" && sed -n '/^files:/,$p' MANIFEST | tail -n +2 | sha256sum -c --quiet) || { echo "manifest hashes do not match"; exit 1; }
grep -q '^board: ' "$img/MANIFEST" && grep -q '^kernels: ' "$img/MANIFEST"
[ -f "$img/share/vkrt/LICENSE" ] || { echo "no LICENSE in the image"; exit 1; }
cat > "$work/prog.c" <<'EOC'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vkrt/vkrt.h>
int main(void) {
  vkrt_options o;
  vkrt_options_initialize(&o);
  vkrt_appliance *app = NULL;
  char why[512];
  vkrt_status s = vkrt_open(&o, &app, why, sizeof why);
  if (s != VKRT_OK) { fprintf(stderr, "open: %s: %s\n", vkrt_status_str(s), why); return 1; }
  enum { N = 4096 };
  unsigned *in = malloc(N * 4), *back = malloc(N * 4);
  srand(7);
  for (int i = 0; i < N; i++) { in[i] = (unsigned)rand() * 2654435761u; back[i] = 0xdeadbeef; }
  vkrt_buffer *b = NULL;
  if (vkrt_buffer_create(app, 0, N * 4, VKRT_BUFFER_DEVICE_LOCAL, &b) != VKRT_OK ||
      vkrt_upload(b, 0, in, N * 4) != VKRT_OK || vkrt_download(back, b, 0, N * 4) != VKRT_OK) {
    fprintf(stderr, "round trip failed: %s\n", vkrt_last_error(app)); return 1;
  }
  int ok = memcmp(in, back, N * 4) == 0;
  printf("devices %u, round trip %s\n", vkrt_device_count(app), ok ? "ok" : "MISMATCH");
  vkrt_buffer_destroy(b);
  vkrt_close(app);
  free(in); free(back);
  return ok ? 0 : 1;
}
EOC
export PKG_CONFIG_PATH="$img/lib/pkgconfig"
flags=$(pkg-config --static --cflags --libs vkrt)
(cd "$work" && cc -std=c11 -Wall -Werror prog.c $flags -o prog)
echo "unpacked into $top/ (manifest hashes match, LICENSE shipped)"
"$work/prog"
echo "link: out-of-tree program built with: pkg-config --static --cflags --libs vkrt -> $flags"
