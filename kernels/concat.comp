#version 450
// Generic concat along dim: dst[i] = i[dim] < a_ne_dim ? a[i] : b[i with i[dim] - a_ne_dim].
// One invocation per dst element, linear over dst ne (dim 0 fastest). Sources with a
// strided dim 0 (e.g. stored transposed) are read uncoalesced here; the host's fast path
// avoids that case for dim 0. Strides/offsets in elements; 32-bit indices are guaranteed
// by the host; base_group carries the split of large grids.
// TYPE is an integer word (uint, uint16_t): elements move as bit patterns.
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint ne[4];          // dst
  uint a_stride[4];
  uint b_stride[4];
  uint dst_stride[4];
  uint a_offset;
  uint b_offset;
  uint dst_offset;
  uint dim;
  uint a_ne_dim;
  uint total;
  uint base_group;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer A { TYPE a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { TYPE b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Dst { TYPE dst[]; };

void main() {
  uint group = pc.base_group + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  uint idx = group * 256u + gl_LocalInvocationID.x;
  if (idx >= pc.total)
    return;
  uvec4 i;
  i.x = idx % pc.ne[0];
  uint r = idx / pc.ne[0];
  i.y = r % pc.ne[1];
  r /= pc.ne[1];
  i.z = r % pc.ne[2];
  i.w = r / pc.ne[2];
  uint d = pc.dst_offset + i.x * pc.dst_stride[0] + i.y * pc.dst_stride[1] +
           i.z * pc.dst_stride[2] + i.w * pc.dst_stride[3];
  if (i[pc.dim] < pc.a_ne_dim) {
    dst[d] = a[pc.a_offset + i.x * pc.a_stride[0] + i.y * pc.a_stride[1] +
               i.z * pc.a_stride[2] + i.w * pc.a_stride[3]];
  } else {
    i[pc.dim] -= pc.a_ne_dim;
    dst[d] = b[pc.b_offset + i.x * pc.b_stride[0] + i.y * pc.b_stride[1] +
               i.z * pc.b_stride[2] + i.w * pc.b_stride[3]];
  }
}
