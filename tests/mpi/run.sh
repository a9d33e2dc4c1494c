#!/usr/bin/env bash
# Multi-host allreduce over MPI (CONFIG_VKRT_TRANSPORT_MPI): builds the sim-lavapipe-2x2-mpi
# board in <builddir>/mpi and runs tests/mpi/test_mpi under mpirun, one rank per host:
#   2 hosts x 2 devices (cpu_proxy) and 3 hosts x 2 devices (host_staged): counts 1, 7, 4097,
#   2^20 + 3, f32 and f16, in and out of place, every rank bit-identical;
#   a stalled host (VKRT_FAULT_HOST_STALL) on 3 hosts (cpu_proxy) and 2 hosts (host_staged):
#   VKRT_ERROR_TIMEOUT naming the host on every rank within the budget, no thread left;
#   vkrt-service tensor-parallel over 2 hosts (verified against float64, hosts bit-identical)
#   and a short vkrt-bench allreduce over 2 hosts (#wrong = 0 on every row, exit status);
#   a program built only from the board's image and `pkg-config --static vkrt` over 2 hosts.
# Skipped when MPI is not installed (./configure --install-deps installs it).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
if ! command -v mpirun >/dev/null || ! pkg-config --exists ompi-c; then
  echo "mpi: Open MPI not installed (Debian libopenmpi-dev openmpi-bin): skipped"
  exit 0
fi
. tests/mpi/mpi-env.sh
dir="${VKRT_BUILDDIR:-build}/mpi"
mkdir -p "$dir"
/usr/bin/python3 scripts/kconfig.py --config "$dir/.config" defconfig \
  boards/sim-lavapipe-2x2-mpi/defconfig >/dev/null
# the SPIR-V kernels from the suite's build folder (the ones it lacks compiled here)
from="${VKRT_BUILDDIR:-build}"
[ -d "$from/gen/kernels" ] || from=""
./configure --config "$dir/.config" --builddir "$dir" ${from:+--kernels-from "$from"} >"$dir/configure.log" 2>&1 ||
  { cat "$dir/configure.log"; exit 1; }
abs=$(cd "$dir" && pwd)
ninja -C "$dir" "$abs/tests/mpi/test_mpi" "$abs/bin/vkrt-service" "$abs/bin/vkrt-bench" >"$dir/ninja.log" 2>&1 || { tail -30 "$dir/ninja.log"; exit 1; }
t=$abs/tests/mpi/test_mpi
run() { # hosts, test_mpi arguments...
  local np=$1; shift
  local start=$SECONDS
  echo "== mpirun -np $np test_mpi $*"
  if ! timeout 300 mpirun "${VKRT_MPIRUN_ARGS[@]}" -np "$np" "$t" "$@" >"$dir/run.log" 2>&1; then
    cat "$dir/run.log"
    echo "FAIL: mpirun -np $np test_mpi $* (exit status above)"
    exit 1
  fi
  grep -E "^test_mpi: (host[0-9]+: vkrt: host|host[0-9]+/dev|seed|[0-9]+ checks)" "$dir/run.log"
  echo "   ($((SECONDS - start)) s)"
}
run 2 --transport cpu_proxy
run 3 --transport host_staged
run 3 --stall 1 --timeout-ms 1000 --transport cpu_proxy
run 2 --stall 0 --timeout-ms 1000 --transport host_staged
start=$SECONDS
weights=$dir/service-weights-l2-h128.gguf
[ -f "$weights" ] || "$abs/bin/vkrt-service" --make-gguf "$weights" --layers 2 --hidden 128 \
  --ffn 512 --dtype f16 >/dev/null
echo "== mpirun -np 2 vkrt-service --tokens 20"
timeout 300 mpirun "${VKRT_MPIRUN_ARGS[@]}" -np 2 "$abs/bin/vkrt-service" --weights "$weights" \
  --tokens 20 >"$dir/service.log" 2>&1 || { cat "$dir/service.log"; echo "FAIL: vkrt-service over 2 hosts"; exit 1; }
grep -E "^vkrt-service: (tensor-parallel|verified)" "$dir/service.log"
grep -q "over 2 hosts x 2 devices" "$dir/service.log" || { cat "$dir/service.log"; echo "FAIL: service did not span the hosts"; exit 1; }
echo "== mpirun -np 2 vkrt-bench allreduce --min 4 --max 1M --iters 2 --transport cpu_proxy"
timeout 300 mpirun "${VKRT_MPIRUN_ARGS[@]}" -np 2 "$abs/bin/vkrt-bench" allreduce --min 4 --max 1M \
  --iters 2 --transport cpu_proxy >"$dir/bench.log" 2>&1 || { cat "$dir/bench.log"; echo "FAIL: vkrt-bench allreduce over 2 hosts"; exit 1; }
grep -q "2 hosts x 2 devices" "$dir/bench.log" || { cat "$dir/bench.log"; echo "FAIL: bench did not span the hosts"; exit 1; }
awk '/^ +[0-9]/ && $8 != 0 { bad = 1 } END { exit bad }' "$dir/bench.log" ||
  { cat "$dir/bench.log"; echo "FAIL: #wrong != 0"; exit 1; }
echo "== image: pkg-config --cflags --libs --static vkrt, mpirun -np 2 image_link"
tools/make-image.sh "$dir" >"$dir/image.log" 2>&1 || { cat "$dir/image.log"; echo "FAIL: make-image"; exit 1; }
pc=$abs/image/lib/pkgconfig
cc -std=c11 tests/mpi/image_link.c $(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs --static vkrt) \
  -o "$dir/image_link" || { echo "FAIL: linking against the image with its vkrt.pc"; exit 1; }
timeout 120 mpirun "${VKRT_MPIRUN_ARGS[@]}" -np 2 "$dir/image_link" >"$dir/image_link.log" 2>&1 ||
  { cat "$dir/image_link.log"; echo "FAIL: image_link over 2 hosts"; exit 1; }
grep "^image_link" "$dir/image_link.log"
echo "   service + bench + image ($((SECONDS - start)) s)"
echo "mpi: 2 and 3 hosts bit-identical; stalled host -> VKRT_ERROR_TIMEOUT on every rank"
