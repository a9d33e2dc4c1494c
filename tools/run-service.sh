#!/usr/bin/env bash
# `make run`: the main job. vkrt-service generates text with a real llama model
# (tests/data/stories260K.gguf) tensor-parallel over the board's devices, checked against the
# float64 reference, and prints its summary (tokens/s, latency against the roofline). A build
# without the transformer decode kernels runs the synthetic MLP stack for a few seconds instead.
set -euo pipefail
builddir=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
svc="$builddir/bin/vkrt-service"
if [ ! -x "$svc" ]; then
  echo "vkrt-service is not in this configuration (needs matmul, reduce and collectives);"
  echo "running vkrt-probe instead"
  exec "$builddir/bin/vkrt-probe"
fi
model=yes
for k in RMS_NORM ROPE GET_ROWS SET_ROWS ATTENTION ARGMAX; do
  grep -q "^#define CONFIG_VKRT_KERNEL_$k 1" "$builddir/include/vkrt/config.h" || model=no
done
if [ $model = yes ]; then
  exec "$svc" --weights "$root/tests/data/stories260K.gguf" --tokens "${VKRT_RUN_TOKENS:-200}"
fi
echo "this configuration lacks the transformer decode kernels: running the synthetic MLP stack"
weights="$builddir/service-weights-l4-h256.gguf"
[ -f "$weights" ] || "$svc" --make-gguf "$weights" --layers 4 --hidden 256 --ffn 1024 --dtype f16
exec "$svc" --weights "$weights" --tokens 100000 --seconds "${VKRT_RUN_SECONDS:-3}"
