// Arrival counters (runtime/device/stream.c, vkrt_stream_order): in a captured graph with
// them on, a counted kernel is ordered after the op before it by waiting until that op's
// counter holds all its workgroups, instead of a pipeline barrier (the GPU then overlaps the
// two: on an H100 a dependent step cost 2-3.5 us less, vkrt-bench chain), and counts its own
// workgroups in its counter once their writes are done. The push constants name the slots
// (pc.order_wait_slot / order_wait_target: 0 waits for nothing; pc.order_signal_slot: 0
// counts nowhere). A wait gives up after ORDER_SPIN_LIMIT polls and sets slot 0, so a GPU
// that ran this dispatch's workgroups before the earlier one's never hangs. Operands another
// op writes must be read `coherent` (no stale L1 line: no barrier invalidates it). The
// including kernel defines ORDER_BINDING, its last binding.
layout(std430, set = 0, binding = ORDER_BINDING) coherent buffer OrderCounters { uint order_counter[]; };
const uint ORDER_SPIN_LIMIT = 1u << 22;

void order_wait() {
  if (pc.order_wait_target == 0u)
    return;
  if (gl_LocalInvocationIndex == 0u) {
    uint polls = 0u;
    while (atomicAdd(order_counter[pc.order_wait_slot], 0u) < pc.order_wait_target)
      if (++polls >= ORDER_SPIN_LIMIT) {
        atomicOr(order_counter[0], 1u);
        break;
      }
  }
  barrier();
  memoryBarrierBuffer();
}

void order_signal() {
  if (pc.order_signal_slot == 0u)
    return;
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationIndex == 0u)
    atomicAdd(order_counter[pc.order_signal_slot], 1u);
}
