#version 450
// Generic concat, one row segment per invocation (the layout of copy_rows.comp):
// workgroup (x, y, z) = (1024-element segment of dst dim 0, i1, i2 + i3 * ne2). For dim >
// 0 the source is the same for a whole row; for dim 0 it switches once per row. Taken by
// the host for rows of 128+ elements; concat.comp (linear) for short rows.
// TYPE is an integer word (uint, uint16_t): elements move as bit patterns.
#extension GL_EXT_shader_16bit_storage : require

#define PER_INVOCATION 4u
#define SEGMENT 1024u

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint ne0, ne1, ne2;  // dst
  uint a_stride[4];
  uint b_stride[4];
  uint dst_stride[4];
  uint a_offset;
  uint b_offset;
  uint dst_offset;
  uint dim;
  uint a_ne_dim;
  uint base_x, base_y, base_z;
} pc;

layout(std430, set = 0, binding = 0) restrict readonly buffer A { TYPE a[]; };
layout(std430, set = 0, binding = 1) restrict readonly buffer B { TYPE b[]; };
layout(std430, set = 0, binding = 2) restrict writeonly buffer Dst { TYPE dst[]; };

void main() {
  uvec4 i;
  i.y = pc.base_y + gl_WorkGroupID.y;
  uint z = pc.base_z + gl_WorkGroupID.z;
  i.z = z % pc.ne2;
  i.w = z / pc.ne2;
  uint x0 = (pc.base_x + gl_WorkGroupID.x) * SEGMENT + gl_LocalInvocationID.x;
  uint d = pc.dst_offset + i.y * pc.dst_stride[1] + i.z * pc.dst_stride[2] + i.w * pc.dst_stride[3];
  i.x = 0u;
  bool row_from_a = pc.dim == 0u || i[pc.dim] < pc.a_ne_dim;
  uvec4 ib = i;
  if (pc.dim != 0u && !row_from_a)
    ib[pc.dim] -= pc.a_ne_dim;
  uint sa = pc.a_offset + i.y * pc.a_stride[1] + i.z * pc.a_stride[2] + i.w * pc.a_stride[3];
  uint sb = pc.b_offset + ib.y * pc.b_stride[1] + ib.z * pc.b_stride[2] + ib.w * pc.b_stride[3];
  for (uint k = 0u; k < PER_INVOCATION; k++) {
    uint i0 = x0 + k * 256u;
    if (i0 >= pc.ne0)
      break;
    bool from_a = pc.dim == 0u ? i0 < pc.a_ne_dim : row_from_a;
    uint bi0 = pc.dim == 0u ? i0 - pc.a_ne_dim : i0;
    // two stores, not a select of two loads: a select on 16-bit values needs shaderFloat16
    if (from_a)
      dst[d + i0 * pc.dst_stride[0]] = a[sa + i0 * pc.a_stride[0]];
    else
      dst[d + i0 * pc.dst_stride[0]] = b[sb + bi0 * pc.b_stride[0]];
  }
}
