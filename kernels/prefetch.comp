#version 450
// The lab's cache prefetch: reads one word of every 32-byte sector of a range, so the
// range's lines sit in the device's caches (L2 on GPUs) when the next op reads them; a
// hint, with no result. Workgroup w takes the 1024 sectors from sector 1024 w; invocation
// l of it sectors l, l + 256, l + 512 and l + 768 (four loads in flight; each load
// instruction of a subgroup touches consecutive sectors). The store runs only when
// `never` is not 0 and equals what was read, which the host never asks for: it keeps the
// loads from being compiled away. Word offsets from the binding start.
layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint first, sectors; // first word, sectors of 8 words
  uint never, slot;    // never: 0 from the host; slot: the sink word the dead store names
  uint base_x, base_y, base_z;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Sink { uint sink[]; };

void main() {
  uint s0 = (pc.base_x + gl_WorkGroupID.x) * 1024u + gl_LocalInvocationID.x;
  uint acc = 0u;
  for (uint k = 0u; k < 4u; k++) {
    uint s = s0 + 256u * k;
    if (s < pc.sectors)
      acc ^= src[pc.first + 8u * s];
  }
  if (pc.never != 0u && acc == pc.never)
    sink[pc.slot] = acc;
}
