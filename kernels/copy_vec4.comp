#version 450
// Contiguous device-to-device copy, 16 bytes per load, grid-stride: the host dispatches a
// bounded number of workgroups and each invocation walks the range. This is the copy that
// beats vkCmdCopyBuffer on discrete GPUs. Offsets and count are in 16-byte units.
layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint src_offset;
  uint dst_offset;
  uint count;
  uint pad;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { uvec4 dst[]; };

void main() {
  uint stride = gl_NumWorkGroups.x * 256u;
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride)
    dst[pc.dst_offset + i] = src[pc.src_offset + i];
}
