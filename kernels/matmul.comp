#version 450
// Tiled matmul (ggml mul_mat): dst[n, m] = sum_k w[k, n] * x[k, m] per batch (i2, i3),
// w broadcast over batches (r2 = x.ne2 / w.ne2, r3 = x.ne3 / w.ne3). Tiles of BN x BM
// outputs, BK-deep slices of w and x staged in shared memory (one column of padding
// against bank conflicts: both slices are loaded k-fastest); 16x16 invocations compute
// 4x4 outputs each. Any element strides (in elements; f16 w is read as packed halves so
// no 16-bit storage is needed). base_* carry the grid split.
#define BN 64u
#define BM 64u
#define BK 16u

layout(local_size_x = 16, local_size_y = 16) in;

layout(push_constant) uniform Push {
  uint K, N, M;
  uint w_stride[4];
  uint x_stride[4];
  uint d_stride[4];
  uint w_offset, x_offset, d_offset;
  uint ne2, r2, r3;
  uint accumulate;  // 1: dst += result (vkrt_op_matmul_add)
  uint base_x, base_y, base_z;
} pc;

#ifdef W_F16
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
float load_w(uint e) {
  vec2 pair = unpackHalf2x16(w[e >> 1]);
  return (e & 1u) != 0u ? pair.y : pair.x;
}
#else
layout(std430, set = 0, binding = 0) readonly buffer W { float w[]; };
float load_w(uint e) { return w[e]; }
#endif
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 2) buffer D { float d[]; };

shared float ws[BK][BN + 1u];
shared float xs[BK][BM + 1u];

void main() {
  uint tid = gl_LocalInvocationID.y * 16u + gl_LocalInvocationID.x;
  uint n0 = (pc.base_x + gl_WorkGroupID.x) * BN;
  uint m0 = (pc.base_y + gl_WorkGroupID.y) * BM;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint wb = pc.w_offset + (i2 / pc.r2) * pc.w_stride[2] + (i3 / pc.r3) * pc.w_stride[3];
  uint xb = pc.x_offset + i2 * pc.x_stride[2] + i3 * pc.x_stride[3];
  uint db = pc.d_offset + i2 * pc.d_stride[2] + i3 * pc.d_stride[3];

  float acc[4][4];
  for (uint i = 0u; i < 4u; i++)
    for (uint j = 0u; j < 4u; j++)
      acc[i][j] = 0.0;

  uint tn = gl_LocalInvocationID.y;  // rows n0 + tn + 16*i
  uint tm = gl_LocalInvocationID.x;  // cols m0 + tm + 16*j
  for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
    // 1024 elements of each slice, 4 per invocation, k fastest (contiguous for ggml rows).
    for (uint e = tid; e < BK * BN; e += 256u) {
      uint kk = e % BK, nn = e / BK;
      uint k = k0 + kk, n = n0 + nn;
      ws[kk][nn] = (k < pc.K && n < pc.N) ? load_w(wb + k * pc.w_stride[0] + n * pc.w_stride[1]) : 0.0;
    }
    for (uint e = tid; e < BK * BM; e += 256u) {
      uint kk = e % BK, mm = e / BK;
      uint k = k0 + kk, m = m0 + mm;
      xs[kk][mm] = (k < pc.K && m < pc.M) ? x[xb + k * pc.x_stride[0] + m * pc.x_stride[1]] : 0.0;
    }
    barrier();
    for (uint kk = 0u; kk < BK; kk++) {
      float a[4], b[4];
      for (uint i = 0u; i < 4u; i++)
        a[i] = ws[kk][tn + 16u * i];
      for (uint j = 0u; j < 4u; j++)
        b[j] = xs[kk][tm + 16u * j];
      for (uint i = 0u; i < 4u; i++)
        for (uint j = 0u; j < 4u; j++)
          acc[i][j] += a[i] * b[j];
    }
    barrier();
  }
  for (uint i = 0u; i < 4u; i++) {
    uint n = n0 + tn + 16u * i;
    for (uint j = 0u; j < 4u; j++) {
      uint m = m0 + tm + 16u * j;
      uint di = db + n * pc.d_stride[0] + m * pc.d_stride[1];
      if (n < pc.N && m < pc.M)
        d[di] = pc.accumulate != 0u ? d[di] + acc[i][j] : acc[i][j];
    }
  }
}
