#version 450
// Strided copy with type conversion, one row segment per invocation: workgroup
// (x, y, z) = (1024-element segment of dim 0, i1, i2 + i3 * ne2). Each invocation moves 4
// elements 256 apart (every access of a subgroup coalesced along dim 0); only the row index needs a division. The host takes this kernel
// for rows of 128+ elements and copy.comp (linear) for short rows. Strides and offsets in
// elements; base_* carry the grid split.
#extension GL_EXT_shader_16bit_storage : require

#define PER_INVOCATION 4u
#define SEGMENT 1024u

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint ne0, ne1, ne2;
  uint src_stride[4];
  uint dst_stride[4];
  uint src_offset;
  uint dst_offset;
  uint base_x, base_y, base_z;
} pc;

layout(std430, set = 0, binding = 0) restrict readonly buffer Src { SRC_TYPE src[]; };
layout(std430, set = 0, binding = 1) restrict writeonly buffer Dst { DST_TYPE dst[]; };

void main() {
  uint i1 = pc.base_y + gl_WorkGroupID.y;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint x0 = (pc.base_x + gl_WorkGroupID.x) * SEGMENT + gl_LocalInvocationID.x;
  uint s = pc.src_offset + i1 * pc.src_stride[1] + i2 * pc.src_stride[2] + i3 * pc.src_stride[3];
  uint d = pc.dst_offset + i1 * pc.dst_stride[1] + i2 * pc.dst_stride[2] + i3 * pc.dst_stride[3];
  // restrict lets the compiler issue all loads before the stores
  for (uint k = 0u; k < PER_INVOCATION; k++) {
    uint i0 = x0 + k * 256u;
    if (i0 < pc.ne0) {
#ifdef SAME_TYPE
      dst[d + i0 * pc.dst_stride[0]] = src[s + i0 * pc.src_stride[0]];
#else
      dst[d + i0 * pc.dst_stride[0]] = DST_TYPE(src[s + i0 * pc.src_stride[0]]);
#endif
    }
  }
}
