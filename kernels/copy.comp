#version 450
// Strided 4-D copy with type conversion: dst[i0,i1,i2,i3] = src[i0,i1,i2,i3].
// One invocation per element, linear index over ne (dim 0 fastest, so reads and writes
// coalesce when dim 0 is innermost). Offsets and strides are in elements relative to the
// bound ranges; the host guarantees every index fits in 32 bits and splits the grid so no
// dispatch exceeds maxComputeWorkGroupCount (base carries the split).
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint ne[4];
  uint src_stride[4];
  uint dst_stride[4];
  uint src_offset;
  uint dst_offset;
  uint total;        // ne0*ne1*ne2*ne3 (< 2^31)
  uint base;         // first linear workgroup of this dispatch
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Src { SRC_TYPE src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { DST_TYPE dst[]; };

void main() {
  uint group = pc.base + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  uint idx = group * 256u + gl_LocalInvocationID.x;
  if (idx >= pc.total)
    return;
  uint i0 = idx % pc.ne[0];
  uint r = idx / pc.ne[0];
  uint i1 = r % pc.ne[1];
  r /= pc.ne[1];
  uint i2 = r % pc.ne[2];
  uint i3 = r / pc.ne[2];
  uint s = pc.src_offset + i0 * pc.src_stride[0] + i1 * pc.src_stride[1] +
           i2 * pc.src_stride[2] + i3 * pc.src_stride[3];
  uint d = pc.dst_offset + i0 * pc.dst_stride[0] + i1 * pc.dst_stride[1] +
           i2 * pc.dst_stride[2] + i3 * pc.dst_stride[3];
#ifdef SAME_TYPE
  dst[d] = src[s];  // bit-exact (no convert of a 16-bit value to itself)
#else
  dst[d] = DST_TYPE(src[s]);
#endif
}
