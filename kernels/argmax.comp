#version 450
// Argmax per row (greedy sampling): the index of the largest element, the lowest among
// equal ones; NaN never wins; a row of NaNs gives 0. A long row is cut into `splits`
// chunks, one workgroup each (a 128K vocabulary must not sit on one workgroup):
//   mode 0: chunk (split x, row y) of x -> its best (value bits, index) into part[]
//   mode 1: the splits of row y from part[] -> dst[y]
//   mode 2: a whole row (splits = 1) of x -> dst[y] directly
// In each workgroup: a strided share per invocation, then subgroupMax of the values and
// subgroupMin of the indices holding that max, then the subgroups through shared memory.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n, chunk, splits, mode;
  uint x_offset, x_stride0, x_stride1;
  uint d_offset, d_stride0;
  uint base_x, base_y, base_z;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) buffer P { uvec2 part[]; };
layout(std430, set = 0, binding = 2) writeonly buffer D { int dst[]; };

const uint NONE = 0xffffffffu;
shared float sv[128];
shared uint si[128];

// (v, i) beats (bv, bi): larger, or equal with a lower index; NaN (v != v) never does.
void take(inout float bv, inout uint bi, float v, uint i) {
  if (v > bv || (v == bv && i < bi))
    bv = v, bi = i;
}

void main() {
  uint split = pc.base_x + gl_WorkGroupID.x, row = pc.base_y + gl_WorkGroupID.y;
  uint t = gl_LocalInvocationID.x;
  float bv = uintBitsToFloat(0xff800000u); // -inf
  uint bi = NONE;
  if (pc.mode == 1u) {
    for (uint k = t; k < pc.splits; k += 256u) {
      uvec2 p = part[row * pc.splits + k];
      take(bv, bi, uintBitsToFloat(p.x), p.y);
    }
  } else {
    uint begin = split * pc.chunk, end = min(begin + pc.chunk, pc.n);
    uint xr = pc.x_offset + row * pc.x_stride1;
    // four loads in flight per step (a 1024-element chunk is one memory round trip)
    for (uint i = begin + t; i < end; i += 1024u) {
      float v0 = x[xr + i * pc.x_stride0];
      float v1 = i + 256u < end ? x[xr + (i + 256u) * pc.x_stride0] : 0.0;
      float v2 = i + 512u < end ? x[xr + (i + 512u) * pc.x_stride0] : 0.0;
      float v3 = i + 768u < end ? x[xr + (i + 768u) * pc.x_stride0] : 0.0;
      take(bv, bi, v0, i);
      if (i + 256u < end)
        take(bv, bi, v1, i + 256u);
      if (i + 512u < end)
        take(bv, bi, v2, i + 512u);
      if (i + 768u < end)
        take(bv, bi, v3, i + 768u);
    }
  }
  float m = subgroupMax(bv);
  uint mi = subgroupMin(bv == m ? bi : NONE);
  if (subgroupElect()) {
    sv[gl_SubgroupID] = m;
    si[gl_SubgroupID] = mi;
  }
  barrier();
  if (gl_SubgroupID == 0u) {
    bv = uintBitsToFloat(0xff800000u), bi = NONE;
    for (uint k = gl_SubgroupInvocationID; k < gl_NumSubgroups; k += gl_SubgroupSize)
      take(bv, bi, sv[k], si[k]);
    m = subgroupMax(bv);
    mi = subgroupMin(bv == m ? bi : NONE);
    if (subgroupElect()) {
      if (pc.mode == 0u)
        part[row * pc.splits + split] = uvec2(floatBitsToUint(m), mi);
      else
        dst[pc.d_offset + row * pc.d_stride0] = mi == NONE ? 0 : int(mi);
    }
  }
}
