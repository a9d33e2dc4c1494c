#version 450
// RMS norm with the weight multiply fused (ggml RMS_NORM then MUL): per row r,
// d[i] = x[i] * (1 / sqrt(sum(x^2) / n + eps)) * w[i] (w[i] = 1 without weights).
// One workgroup per row: each invocation sums the squares of a strided share of the row,
// subgroupAdd, then the subgroup sums meet in shared memory. The second loop rereads the
// row (cached) and writes it; d may be x exactly (each element read, then written, by one
// invocation, after every read of the first loop).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n, ne1, ne2;          // row length; rows are ne1 * ne2 * ne3
  uint x_offset, x_stride0, x_stride1, x_stride2, x_stride3;
  uint d_offset, d_stride0, d_stride1, d_stride2, d_stride3;
  uint w_offset, w_stride0, has_w;
  float eps;
  uint base_x, base_y, base_z;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer W { float w[]; };
layout(std430, set = 0, binding = 2) buffer D { float d[]; };

// one entry per subgroup (subgroups of at least 2 invocations)
shared float partial[128];

void main() {
  uint r1 = pc.base_y + gl_WorkGroupID.y, r2 = pc.base_z + gl_WorkGroupID.z;
  uint r3 = r2 / pc.ne2;
  r2 %= pc.ne2;
  uint xr = pc.x_offset + r1 * pc.x_stride1 + r2 * pc.x_stride2 + r3 * pc.x_stride3;
  uint dr = pc.d_offset + r1 * pc.d_stride1 + r2 * pc.d_stride2 + r3 * pc.d_stride3;
  uint t = gl_LocalInvocationID.x;
  // Four independent loads in flight per invocation per step (a plain loop waits for each
  // load before issuing the next: a 4096-row would take 16 memory round trips).
  float sum = 0.0;
  for (uint i = t; i < pc.n; i += 1024u) {
    float v0 = x[xr + i * pc.x_stride0];
    float v1 = i + 256u < pc.n ? x[xr + (i + 256u) * pc.x_stride0] : 0.0;
    float v2 = i + 512u < pc.n ? x[xr + (i + 512u) * pc.x_stride0] : 0.0;
    float v3 = i + 768u < pc.n ? x[xr + (i + 768u) * pc.x_stride0] : 0.0;
    sum += (v0 * v0 + v1 * v1) + (v2 * v2 + v3 * v3);
  }
  sum = subgroupAdd(sum);
  if (subgroupElect())
    partial[gl_SubgroupID] = sum;
  barrier();
  if (gl_SubgroupID == 0u) {
    float s = 0.0;
    for (uint k = gl_SubgroupInvocationID; k < gl_NumSubgroups; k += gl_SubgroupSize)
      s += partial[k];
    s = subgroupAdd(s);
    if (subgroupElect())
      partial[0] = s;
  }
  barrier();
  float scale = inversesqrt(partial[0] / float(pc.n) + pc.eps);
  for (uint i = t; i < pc.n; i += 1024u) {
    vec4 v, m = vec4(1.0);
    for (uint k = 0u; k < 4u; k++) // loads first, then the stores
      v[k] = i + 256u * k < pc.n ? x[xr + (i + 256u * k) * pc.x_stride0] : 0.0;
    if (pc.has_w != 0u)
      for (uint k = 0u; k < 4u; k++)
        m[k] = i + 256u * k < pc.n ? w[pc.w_offset + (i + 256u * k) * pc.w_stride0] : 0.0;
    for (uint k = 0u; k < 4u; k++)
      if (i + 256u * k < pc.n)
        d[dr + (i + 256u * k) * pc.d_stride0] = v[k] * scale * m[k];
  }
}
