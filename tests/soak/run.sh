#!/usr/bin/env bash
# `make soak`: the soak test for a bounded duration (default 120 s, 100000 allreduces) in the
# normal build, then under ThreadSanitizer (build-tsan) for a shorter time.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${1:-build}
export VKRT_SOAK_SECONDS=${VKRT_SOAK_SECONDS:-120} VKRT_SOAK_ALLREDUCES=${VKRT_SOAK_ALLREDUCES:-100000}
"$root/$builddir/tests/vk/test_soak"
if [ "${VKRT_SOAK_TSAN:-1}" = 1 ]; then
  cd "$root"
  CC=gcc ./configure --builddir build-tsan --sanitize tsan --opt=-O1 >/dev/null
  ninja -C build-tsan build-tsan/tests/vk/test_soak >/dev/null 2>&1 || ninja -C build-tsan
  TSAN_OPTIONS="suppressions=$root/tests/sanitizers/tsan.supp halt_on_error=1" \
    VKRT_SOAK_SECONDS=$((VKRT_SOAK_SECONDS / 4 + 1)) build-tsan/tests/vk/test_soak
fi
