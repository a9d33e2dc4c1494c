#!/usr/bin/env bash
# The runtime folders include each other only downwards (base <- vk <- device <- wings <-
# appliance <- lab) and without a cycle; runtime/device calls nothing of import/transport/ops.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 "$root/scripts/include-graph.py" --root "$root"
if grep -rn 'include "\(import\|transport\|ops\|appliance\)/' "$root/runtime/device"; then
  echo "runtime/device includes a wing or the appliance"; exit 1
fi
# No call from runtime/device into a wing's functions (their prefixes).
if grep -rnE '\bvkrt_(upload|registry|region|import|collective|transport|ops|op)_[a-z_]+\(' \
     "$root/runtime/device" --include=*.c; then
  echo "runtime/device calls a wing"; exit 1
fi
echo "runtime/device: no include of, no call into import/transport/ops/appliance"
