#!/usr/bin/env bash
# The Kconfig transport preference reaches the planner: a sim-lavapipe-x2 build with
# CONFIG_VKRT_TRANSPORT_PREFER_CPU_PROXY=y plans native_fd out *because of the preference*
# (vkrt-probe names it as native_fd's reason, ahead of any capability check), and the same
# board without it does not mention it (control: the check can fail the other way too).
. "$(dirname "$0")/lib.sh"
for pref in AUTO CPU_PROXY; do
  { cat "$ROOT/boards/sim-lavapipe-x2/defconfig"
    echo "CONFIG_VKRT_TRANSPORT_PREFER_$pref=y"; } > "$SCRATCH/pref-$pref.frag"
  config_from "pref-$pref" "$SCRATCH/pref-$pref.frag"
  grep -q "^CONFIG_VKRT_TRANSPORT_PREFER_$pref=y" "$SCRATCH/pref-$pref.config" \
    || fail "CONFIG_VKRT_TRANSPORT_PREFER_$pref=y did not stick"
  build_config "pref-$pref" "$SCRATCH/build-pref-$pref/bin/vkrt-probe" \
    || { tail -30 "$SCRATCH/pref-$pref.log"; fail "preference $pref does not build"; }
  out=$("$SCRATCH/build-pref-$pref/bin/vkrt-probe" 2>&1) || fail "vkrt-probe ($pref): $out"
  line=$(grep 'native_fd' <<< "$out" | grep -v ' -> ' | head -1 || true)
  echo "preference $pref: $line"
  if [ $pref = CPU_PROXY ]; then
    grep -q "preference is forced CPU proxy (CONFIG_VKRT_TRANSPORT_PREFER_CPU_PROXY)" <<< "$out" \
      || fail "forced CPU proxy preference did not reach the planner: $line"
  else
    grep -q "preference is forced" <<< "$out" && fail "auto preference reported as forced: $line"
  fi
done
echo "transport preference reaches the planner"
