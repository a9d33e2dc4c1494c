# Helpers for the configuration tests: scratch configs and builds outside build/.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Each script gets its own scratch folder (runs may overlap), removed at exit unless kept.
if [ -n "${VKRT_SCRATCH:-}" ]; then
  SCRATCH=$VKRT_SCRATCH
  mkdir -p "$SCRATCH"
else
  SCRATCH=$(mktemp -d /tmp/vkrt-config-tests.XXXXXX)
  trap 'rm -rf "$SCRATCH"' EXIT
fi
KTOOL=(/usr/bin/python3 "$ROOT/scripts/kconfig.py" --srcdir "$ROOT")
# The config tests build many configurations of one tree: through ccache (Debian package
# ccache, in configure's dependency list) a C file whose preprocessed text is the same in two
# of them is compiled once. Paths are made relative to the build folder and the folder is not
# hashed, so builds in different scratch folders (and runs, with a kept CCACHE_DIR) share.
# Only build_config uses it: with CCACHE_BASEDIR the depfiles name headers by relative paths
# that ninja cannot tie to the generated headers, so an incremental rebuild after a kernel's
# header changes (push-mismatch.sh) would miss it; build_config's builds are one-shot (or, in
# the matrix, follow a new config.h that configure writes before ninja starts).
# Each script's own hit counts go to its stats log (scripts run side by side).
TEST_CC=${CC:-cc}
if command -v ccache > /dev/null; then
  TEST_CC="ccache $TEST_CC"
  export CCACHE_STATSLOG="$SCRATCH/ccache-stats.log"
fi

# config_from <name> <defconfig-or-fragment-file>: writes $SCRATCH/<name>.config
config_from() {
  "${KTOOL[@]}" --config "$SCRATCH/$1.config" defconfig "$2" >/dev/null
}

# The suite's own build folder (make test builds it first): its SPIR-V kernels are the ones
# every configuration here needs (the shaders do not depend on the configuration), so the
# builds below take them from there (configure --kernels-from) and compile only the ones it
# lacks.
SUITE_BUILD=${VKRT_BUILDDIR:-build}
case "$SUITE_BUILD" in /*) ;; *) SUITE_BUILD="$ROOT/$SUITE_BUILD" ;; esac
[ -d "$SUITE_BUILD/gen/kernels" ] || SUITE_BUILD=""

# build_config <name> [ninja targets...]: configure + build $SCRATCH/<name>.config in
# $SCRATCH/build-<name>; output in $SCRATCH/<name>.log. The SPIR-V kernels come from
# KERNELS_FROM (a build folder; default the suite's, KERNELS_FROM= compiles them all).
build_config() {
  local name=$1; shift
  local dir="$SCRATCH/build-$name" from=${KERNELS_FROM-$SUITE_BUILD}
  (cd "$ROOT" && export CCACHE_BASEDIR=/ CCACHE_NOHASHDIR=1 &&
   ./configure --cc "$TEST_CC" --config "$SCRATCH/$name.config" --builddir "$dir" \
     ${from:+--kernels-from "$from"} &&
   ninja -C "$dir" "$@") \
    > "$SCRATCH/$name.log" 2>&1
}

fail() { echo "FAIL: $*" >&2; exit 1; }
