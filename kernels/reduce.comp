#version 450
// Element-wise sum of 1..8 contiguous inputs, accumulated in f32: the collectives' reduce
// and vkrt_op_add. Bindings 0..7 are the inputs (unused ones alias input 0 and are not
// read), binding 8 the output, which may be one of the inputs (in place: each element is
// read before it is written by the same invocation). Offsets in elements.
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint src_offset[8];
  uint dst_offset;
  uint src_count;
  uint count;
  uint base_group;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer S0 { TYPE s0[]; };
layout(std430, set = 0, binding = 1) readonly buffer S1 { TYPE s1[]; };
layout(std430, set = 0, binding = 2) readonly buffer S2 { TYPE s2[]; };
layout(std430, set = 0, binding = 3) readonly buffer S3 { TYPE s3[]; };
layout(std430, set = 0, binding = 4) readonly buffer S4 { TYPE s4[]; };
layout(std430, set = 0, binding = 5) readonly buffer S5 { TYPE s5[]; };
layout(std430, set = 0, binding = 6) readonly buffer S6 { TYPE s6[]; };
layout(std430, set = 0, binding = 7) readonly buffer S7 { TYPE s7[]; };
layout(std430, set = 0, binding = 8) writeonly buffer Dst { TYPE dst[]; };

void main() {
  uint group = pc.base_group + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  uint i = group * 256u + gl_LocalInvocationID.x;
  if (i >= pc.count)
    return;
  uint n = pc.src_count;
  float sum = float(s0[pc.src_offset[0] + i]);
  if (n > 1u) sum += float(s1[pc.src_offset[1] + i]);
  if (n > 2u) sum += float(s2[pc.src_offset[2] + i]);
  if (n > 3u) sum += float(s3[pc.src_offset[3] + i]);
  if (n > 4u) sum += float(s4[pc.src_offset[4] + i]);
  if (n > 5u) sum += float(s5[pc.src_offset[5] + i]);
  if (n > 6u) sum += float(s6[pc.src_offset[6] + i]);
  if (n > 7u) sum += float(s7[pc.src_offset[7] + i]);
#ifdef F16
  // Round to f16 exactly as reduce_vec4.comp does (packHalf2x16), so an element's bits do
  // not depend on which kernel a rank's alignment picked: allreduce results must be
  // bit-identical across ranks.
  sum = unpackHalf2x16(packHalf2x16(vec2(sum, 0.0))).x;
#endif
  dst[pc.dst_offset + i] = TYPE(sum);
}
