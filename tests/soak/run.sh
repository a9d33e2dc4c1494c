#!/usr/bin/env bash
# `make soak`: the soak test for a bounded duration (default 120 s, 100000 allreduces) in the
# normal build, then under ThreadSanitizer (build-tsan) for a quarter of the time.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${1:-build}
export VKRT_SOAK_SECONDS=${VKRT_SOAK_SECONDS:-120} VKRT_SOAK_ALLREDUCES=${VKRT_SOAK_ALLREDUCES:-100000}
cd "$root"
echo "soak: $builddir, up to $VKRT_SOAK_SECONDS s and $VKRT_SOAK_ALLREDUCES allreduces"
"$builddir/tests/vk/test_soak"
if [ "${VKRT_SOAK_TSAN:-1}" = 1 ]; then
  if ! out=$(./configure --cc gcc --builddir build-tsan --sanitize tsan --opt=-O1 2>&1 &&
             ninja -C build-tsan "$root/build-tsan/tests/vk/test_soak" 2>&1); then
    printf '%s\n' "$out" | tail -30; echo "soak: TSan build failed"; exit 1
  fi
  # As tests/run does: lavapipe and the validation layer stay mapped so the suppressions in
  # tests/sanitizers/tsan.supp can name them (tests/sanitizers/keep_vulkan_loaded.c).
  keep=build-tsan/keep_vulkan_loaded.so
  [ "$keep" -nt tests/sanitizers/keep_vulkan_loaded.c ] ||
    ${HOST_CC:-gcc} -shared -fPIC -O1 -o "$keep" tests/sanitizers/keep_vulkan_loaded.c
  runtime=$(ldd build-tsan/tests/vk/test_soak | awk '/libtsan\.so/ {print $3; exit}')
  tsan_seconds=$((VKRT_SOAK_SECONDS / 4 + 1))
  echo "soak: ThreadSanitizer, up to $tsan_seconds s"
  TSAN_OPTIONS="suppressions=$root/tests/sanitizers/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
    VKRT_SOAK_SECONDS=$tsan_seconds LD_PRELOAD="${runtime:+$runtime }$keep" build-tsan/tests/vk/test_soak
fi
