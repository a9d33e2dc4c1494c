#version 450
// The reduce kernel four elements at a time (one 16-byte f32 or 8-byte f16 load per
// operand per invocation), for operands whose offsets are aligned to four elements; the
// host sends the count % 4 tail to reduce.comp. f16 moves as packed halves (no 16-bit
// storage needed), summed in f32. Offsets and count in units of four elements.
layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint src_offset[8];
  uint dst_offset;
  uint src_count;
  uint count;
  uint base_group;
} pc;

#ifdef F16
#define V uvec2
#define LOAD(p) vec4(unpackHalf2x16((p).x), unpackHalf2x16((p).y))
#define STORE(v) uvec2(packHalf2x16((v).xy), packHalf2x16((v).zw))
#else
#define V vec4
#define LOAD(p) (p)
#define STORE(v) (v)
#endif

layout(std430, set = 0, binding = 0) readonly buffer S0 { V s0[]; };
layout(std430, set = 0, binding = 1) readonly buffer S1 { V s1[]; };
layout(std430, set = 0, binding = 2) readonly buffer S2 { V s2[]; };
layout(std430, set = 0, binding = 3) readonly buffer S3 { V s3[]; };
layout(std430, set = 0, binding = 4) readonly buffer S4 { V s4[]; };
layout(std430, set = 0, binding = 5) readonly buffer S5 { V s5[]; };
layout(std430, set = 0, binding = 6) readonly buffer S6 { V s6[]; };
layout(std430, set = 0, binding = 7) readonly buffer S7 { V s7[]; };
layout(std430, set = 0, binding = 8) writeonly buffer Dst { V dst[]; };

void main() {
  uint group = pc.base_group + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  uint i = group * 256u + gl_LocalInvocationID.x;
  if (i >= pc.count)
    return;
  uint n = pc.src_count;
  vec4 sum = LOAD(s0[pc.src_offset[0] + i]);
  if (n > 1u) sum += LOAD(s1[pc.src_offset[1] + i]);
  if (n > 2u) sum += LOAD(s2[pc.src_offset[2] + i]);
  if (n > 3u) sum += LOAD(s3[pc.src_offset[3] + i]);
  if (n > 4u) sum += LOAD(s4[pc.src_offset[4] + i]);
  if (n > 5u) sum += LOAD(s5[pc.src_offset[5] + i]);
  if (n > 6u) sum += LOAD(s6[pc.src_offset[6] + i]);
  if (n > 7u) sum += LOAD(s7[pc.src_offset[7] + i]);
  dst[pc.dst_offset + i] = STORE(sum);
}
