#!/usr/bin/env bash
# A Kconfig typo in a defconfig (unknown symbol) fails with the symbol's name, both in
# `make <board>_defconfig`'s tool and in configure.
. "$(dirname "$0")/lib.sh"
frag="$SCRATCH/typo.frag"
{ cat "$ROOT/boards/sim-lavapipe-x2/defconfig"; echo "CONFIG_VKRT_TRANSPORT_CPU_PROXYY=y"; } > "$frag"
if out=$("${KTOOL[@]}" --config "$SCRATCH/typo.config" defconfig "$frag" 2>&1); then
  fail "defconfig with an unknown symbol was accepted"
fi
grep -q "VKRT_TRANSPORT_CPU_PROXYY" <<< "$out" || fail "message does not name the symbol: $out"
cp "$frag" "$SCRATCH/typo-direct.config"
if out=$(cd "$ROOT" && ./configure --config "$SCRATCH/typo-direct.config" --builddir "$SCRATCH/build-typo" 2>&1); then
  fail "configure accepted an unknown symbol"
fi
grep -q "VKRT_TRANSPORT_CPU_PROXYY" <<< "$out" || fail "configure message does not name the symbol: $out"
# A value that does not stick (dependency unmet) is an error too.
{ cat "$ROOT/boards/sim-lavapipe-x2/defconfig"; echo "CONFIG_VKRT_DEVICE_UUIDS=\"00\""; } > "$frag"
out=$("${KTOOL[@]}" --config "$SCRATCH/typo.config" defconfig "$frag" 2>&1) && fail "value that did not stick was accepted"
grep -q "VKRT_DEVICE_UUIDS" <<< "$out" || fail "no message naming VKRT_DEVICE_UUIDS: $out"
# A board fact is not a user setting: a defconfig that sets one is refused, saying so.
{ cat "$ROOT/boards/sim-lavapipe-x2/defconfig"; echo "CONFIG_VKRT_DEVICE_COUNT=3"; } > "$frag"
out=$("${KTOOL[@]}" --config "$SCRATCH/typo.config" defconfig "$frag" 2>&1) && fail "a board fact set in a defconfig was accepted"
grep -q "VKRT_DEVICE_COUNT.*board fact" <<< "$out" || fail "no message naming the board fact: $out"
echo "typo: unknown symbol, unmet dependency and a board fact all rejected by name"
