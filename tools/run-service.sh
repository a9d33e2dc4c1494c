#!/usr/bin/env bash
# `make run`: the main job. Creates a small synthetic GGUF weights file under the build folder and
# runs vkrt-service on the configured board for a few seconds, then prints its summary.
set -euo pipefail
builddir=${1:-build}
svc="$builddir/bin/vkrt-service"
if [ ! -x "$svc" ]; then
  echo "vkrt-service is not in this configuration (needs matmul, reduce and collectives);"
  echo "running vkrt-probe instead"
  exec "$builddir/bin/vkrt-probe"
fi
weights="$builddir/service-weights-l4-h256.gguf"
[ -f "$weights" ] || "$svc" --make-gguf "$weights" --layers 4 --hidden 256 --ffn 1024 --dtype f16
exec "$svc" --weights "$weights" --tokens 100000 --seconds "${VKRT_RUN_SECONDS:-3}"
