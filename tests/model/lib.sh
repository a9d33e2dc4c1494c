# Sourced by the model scripts (not a test itself: not executable): root, the build folder
# (VKRT_BUILDDIR, default build), svc = its vkrt-service, and require_llama K... which skips
# the script (exit 77, saying why) when the service or one of the llama forward pass's
# kernels (and the CONFIG_VKRT_KERNEL_K named) is not in this configuration.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
builddir=${VKRT_BUILDDIR:-build}
case "$builddir" in /*) ;; *) builddir="$root/$builddir" ;; esac
svc="$builddir/bin/vkrt-service"

require_llama() {
  [ -x "$svc" ] || { echo "skipped: vkrt-service is not in this configuration"; exit 77; }
  local k
  for k in RMS_NORM ROPE GET_ROWS SET_ROWS ATTENTION ARGMAX "$@"; do
    grep -q "^#define CONFIG_VKRT_KERNEL_$k 1" "$builddir/include/vkrt/config.h" ||
      { echo "skipped: CONFIG_VKRT_KERNEL_$k is not set: the llama forward pass needs it"; exit 77; }
  done
}
