#!/usr/bin/env bash
# vkrt-service: verified decode on 2 and 4 simulated devices, with the import-fails fault off
# and on (the plan then shows pre-stage); bad weights files and shape mismatches fail clearly.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
builddir=${VKRT_BUILDDIR:-build}
case "$builddir" in /*) ;; *) builddir="$root/$builddir" ;; esac
svc="$builddir/bin/vkrt-service"
[ -x "$svc" ] || { echo "vkrt-service not in this configuration"; exit 0; }
work=$(mktemp -d /tmp/vkrt-svc.XXXXXX)
trap 'rm -rf "$work"' EXIT
w="$work/w.bin"
"$svc" --make-weights "$w" --layers 3 --hidden 128 --ffn 512 --dtype f16 >/dev/null
for devices in 2 4; do
  for fault in off on; do
    args=(--weights "$w" --tokens 20 --devices "$devices")
    [ $fault = on ] && args+=(--fault import-fails)
    out=$("$svc" "${args[@]}" 2>&1) || { echo "$out"; echo "service failed: $devices devices, fault $fault"; exit 1; }
    grep -q "ranks bit-identical: yes" <<< "$out" || { echo "$out"; exit 1; }
    if [ $fault = on ]; then
      grep -q "weights via prestaged" <<< "$out" || { echo "$out"; echo "fault on but no pre-stage in the plan"; exit 1; }
    else
      grep -q "weights via imported" <<< "$out" || { echo "$out"; echo "fault off but weights not imported"; exit 1; }
    fi
    echo "$devices devices, import fault $fault: $(echo "$out" | grep -m1 'tokens/s')"
  done
done
# Truncated file: clear message, exit 3, no crash.
head -c 20000 "$w" > "$work/trunc.bin"
set +e
out=$("$svc" --weights "$work/trunc.bin" --tokens 2 2>&1); rc=$?
set -e
[ $rc -eq 3 ] && grep -q "truncated" <<< "$out" || { echo "$out (rc $rc)"; echo "truncated file not reported"; exit 1; }
set +e
out=$("$svc" --weights "$w" --hidden 256 --tokens 2 2>&1); rc=$?
set -e
[ $rc -eq 3 ] && grep -q "shape mismatch" <<< "$out" || { echo "$out (rc $rc)"; echo "wrong --hidden not reported"; exit 1; }
set +e
out=$("$svc" --weights /nonexistent 2>&1); rc=$?
set -e
[ $rc -eq 3 ] || { echo "$out"; exit 1; }
echo "bad inputs: truncated file, wrong --hidden, missing file -> exit 3 with a message"
