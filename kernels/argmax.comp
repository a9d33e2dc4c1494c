#version 450
// Argmax per row (greedy sampling): the index of the largest element, the lowest among
// equal ones; NaN never wins; a row of NaNs gives 0. A long row is cut into `splits`
// chunks, one workgroup each (a 128K vocabulary must not sit on one workgroup):
//   mode 0: chunk (split x, row y) of x -> its best (value bits, index) into part[]
//   mode 1: the splits of row y from part[] -> dst[y]
//   mode 2: a whole row (splits = 1) of x -> dst[y] directly
// In each workgroup: a strided share per invocation, then subgroupMax of the values and
// subgroupMin of the indices holding that max, then the subgroups through shared memory.
// Built with SAMPLE (sample_f32, vkrt_op_sample): a draw from softmax(x / T) by the
// Gumbel-max trick, the largest x * inv_t - log(-log(u)) with u uniform in (0, 1) from a hash
// of the row's key (binding 3: two words a row) and the index, so every element is drawn in
// parallel and the same key draws the same index.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n, chunk, splits, mode;
  uint x_offset, x_stride0, x_stride1;
  uint d_offset, d_stride0;
  float inv_t;                    // SAMPLE: 1 / temperature
  uint k_offset, k_stride0, k_stride1;
  uint base_x, base_y, base_z;    // last: vkrt_ops_dispatch_3d fills them
} pc;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) buffer P { uvec2 part[]; };
layout(std430, set = 0, binding = 2) writeonly buffer D { int dst[]; };
#ifdef SAMPLE
layout(std430, set = 0, binding = 3) readonly buffer K { uint key[]; };

// lowbias32 (Chris Wellons' integer hash): every bit of h reaches every bit of the result
uint mix32(uint h) {
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

// x_i * inv_t plus Gumbel noise -log(-log(u)) for index i under the row's key (k0, k1), u =
// (k + 0.5) / 2^23 from the hash's top 23 bits (vkrt.h gives the formula). The draw's winners
// are the u nearest 1, where -log(u) is small and log(u) in float (2^-21 absolute near 1)
// would lose it: there -log(u) = -log1p(m), m = u - 1 (exact), by 2 atanh(m / (2 + m))'s
// series.
float perturbed(float x, uint i, uint k0, uint k1) {
  uint k = mix32(i + mix32(k0 + mix32(k1))) >> 9u;
  float m = (float(int(k) - 8388608) + 0.5) * (1.0 / 8388608.0); // u - 1, in (-1, 0)
  float e;                                                           // -log(u) > 0
  if (m > -0.25) {
    float z = m / (2.0 + m), z2 = z * z;
    e = -2.0 * z * (1.0 + z2 * (1.0 / 3.0 + z2 * (1.0 / 5.0 + z2 * (1.0 / 7.0 + z2 / 9.0))));
  } else {
    e = -log(1.0 + m);
  }
  return x * pc.inv_t - log(e);
}
#endif

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
#ifdef SAMPLE
    uint kr = pc.k_offset + row * pc.k_stride1;
    uint k0 = key[kr], k1 = key[kr + pc.k_stride0];
#define VALUE(v, i) perturbed(v, i, k0, k1)
#else
#define VALUE(v, i) (v)
#endif
    // four loads in flight per step (a 1024-element chunk is one memory round trip)
    for (uint i = begin + t; i < end; i += 1024u) {
      float v0 = x[xr + i * pc.x_stride0];
      float v1 = i + 256u < end ? x[xr + (i + 256u) * pc.x_stride0] : 0.0;
      float v2 = i + 512u < end ? x[xr + (i + 512u) * pc.x_stride0] : 0.0;
      float v3 = i + 768u < end ? x[xr + (i + 768u) * pc.x_stride0] : 0.0;
      take(bv, bi, VALUE(v0, i), i);
      if (i + 256u < end)
        take(bv, bi, VALUE(v1, i + 256u), i + 256u);
      if (i + 512u < end)
        take(bv, bi, VALUE(v2, i + 512u), i + 512u);
      if (i + 768u < end)
        take(bv, bi, VALUE(v3, i + 768u), i + 768u);
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
