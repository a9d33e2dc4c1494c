#version 450
// Matrix-vector (and matrix times a few vectors) for decode, ggml mul_mat with M <= 8:
//   dst[n, m] = sum_k w[k, n] * x[k, m]   for every batch (i2, i3), w broadcast over batches.
// A workgroup owns ROWS consecutive rows of w at a time and walks blocks of rows with a
// grid stride (grid_x workgroups over nblocks blocks). K is split across the whole
// workgroup: invocation t reads the 16-byte chunks t, t + WG, t + 2 WG, ... of every row
// (8 halves or 4 floats), so each load instruction of the workgroup covers WG * 16
// contiguous bytes; UNROLL chunks per row are loaded before any is used, so
// UNROLL * ROWS 16-byte loads are in flight per invocation. Each loaded x chunk serves all
// ROWS rows and each w chunk all NCOLS columns. Row sums: subgroupAdd, then across
// subgroups through shared memory.
// Specialization constants (ops.c creates one pipeline per variant): 0 workgroup size,
// 1 ROWS, 2 NCOLS (x columns per dispatch, M <= NCOLS), 3 UNROLL.
// The vector path needs 16-byte-aligned rows and x columns; the K % VEC tail is read
// through the scalar aliases (bindings 3 and 4, the same buffers). Offsets/strides of w
// and x are in 16-byte units, those of dst in elements. Rows past N and columns past M
// are clamped to the last one (valid memory, results not stored), so loads never branch.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROWS = 2u;
layout(constant_id = 2) const uint NCOLS = 1u;
layout(constant_id = 3) const uint UNROLL = 2u;
const uint WG = gl_WorkGroupSize.x;
// subgroups of at least 4 invocations (lavapipe's smallest)
const uint NSG = (gl_WorkGroupSize.x + 3u) / 4u;

layout(push_constant) uniform Push {
  uint K, N, M;
  uint k_vec;          // full 16-byte chunks of a row (K / VEC)
  uint w_row;          // 16-byte units between rows
  uint w_offset, x_offset, d_offset;
  uint w_stride2, w_stride3, x_stride2, x_stride3, x_col;  // 16-byte units
  uint d_stride0, d_stride1, d_stride2, d_stride3;          // elements
  uint ne2, r2, r3;    // dst batch dim 2; broadcast ratios x.ne2 / w.ne2, x.ne3 / w.ne3
  uint nblocks, grid_x;  // blocks of ROWS rows; workgroups in the whole grid along x
  uint accumulate;     // 1: dst += result (vkrt_op_matmul_add)
  uint base_x, base_y, base_z;
} pc;

#ifdef W_F16
#define VEC 8u
#define WVEC uvec4
layout(std430, set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
layout(std430, set = 0, binding = 3) readonly buffer W1 { uint w1[]; };
#else
#define VEC 4u
#define WVEC vec4
layout(std430, set = 0, binding = 0) readonly buffer W4 { vec4 w4[]; };
layout(std430, set = 0, binding = 3) readonly buffer W1 { float w1[]; };
#endif
layout(std430, set = 0, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, set = 0, binding = 2) buffer D { float d[]; };
layout(std430, set = 0, binding = 4) readonly buffer X1 { float x1[]; };

shared float partial[ROWS * NCOLS * NSG];

float w_scalar(uint row_base16, uint k) {
#ifdef W_F16
  uint h = row_base16 * 8u + k;
  vec2 pair = unpackHalf2x16(w1[h >> 1]);
  return (h & 1u) != 0u ? pair.y : pair.x;
#else
  return w1[row_base16 * 4u + k];
#endif
}

// dot of one 16-byte w chunk with the x chunk of column base xc (vec4 units)
float dot_chunk(WVEC wv, uint xi) {
#ifdef W_F16
  vec4 xa = x4[xi], xb = x4[xi + 1u];
  return dot(unpackHalf2x16(wv.x), xa.xy) + dot(unpackHalf2x16(wv.y), xa.zw) +
         dot(unpackHalf2x16(wv.z), xb.xy) + dot(unpackHalf2x16(wv.w), xb.zw);
#else
  return dot(wv, x4[xi]);
#endif
}

#ifdef W_F16
#define XSTEP 2u
#else
#define XSTEP 1u
#endif

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint wb = pc.w_offset + (i2 / pc.r2) * pc.w_stride2 + (i3 / pc.r3) * pc.w_stride3;
  uint xb = pc.x_offset + i2 * pc.x_stride2 + i3 * pc.x_stride3;
  uint db = pc.d_offset + i2 * pc.d_stride2 + i3 * pc.d_stride3;
  uint xcol[NCOLS];
  for (uint c = 0u; c < NCOLS; c++)
    xcol[c] = xb + min(c, pc.M - 1u) * pc.x_col;

  for (uint blk = pc.base_x + gl_WorkGroupID.x; blk < pc.nblocks; blk += pc.grid_x) {
    uint row0 = blk * ROWS;
    uint wrow[ROWS];
    for (uint r = 0u; r < ROWS; r++)
      wrow[r] = wb + min(row0 + r, pc.N - 1u) * pc.w_row;
    float acc[ROWS * NCOLS];
    for (uint i = 0u; i < ROWS * NCOLS; i++)
      acc[i] = 0.0;

    uint k = tid;
    for (; k + (UNROLL - 1u) * WG < pc.k_vec; k += UNROLL * WG) {
      WVEC wv[UNROLL * ROWS];
      for (uint u = 0u; u < UNROLL; u++)
        for (uint r = 0u; r < ROWS; r++)
          wv[u * ROWS + r] = w4[wrow[r] + k + u * WG];
      for (uint u = 0u; u < UNROLL; u++)
        for (uint c = 0u; c < NCOLS; c++) {
          uint xi = xcol[c] + (k + u * WG) * XSTEP;
          for (uint r = 0u; r < ROWS; r++)
            acc[r * NCOLS + c] += dot_chunk(wv[u * ROWS + r], xi);
        }
    }
    for (; k < pc.k_vec; k += WG) {
      WVEC wv[ROWS];
      for (uint r = 0u; r < ROWS; r++)
        wv[r] = w4[wrow[r] + k];
      for (uint c = 0u; c < NCOLS; c++)
        for (uint r = 0u; r < ROWS; r++)
          acc[r * NCOLS + c] += dot_chunk(wv[r], xcol[c] + k * XSTEP);
    }
    for (uint kk = pc.k_vec * VEC + tid; kk < pc.K; kk += WG)
      for (uint c = 0u; c < NCOLS; c++) {
        float xv = x1[xcol[c] * 4u + kk];
        for (uint r = 0u; r < ROWS; r++)
          acc[r * NCOLS + c] += w_scalar(wrow[r], kk) * xv;
      }

    for (uint i = 0u; i < ROWS * NCOLS; i++) {
      float s = subgroupAdd(acc[i]);
      if (subgroupElect())
        partial[i * NSG + gl_SubgroupID] = s;
    }
    barrier();
    if (tid < ROWS * NCOLS) {
      uint r = tid / NCOLS, c = tid % NCOLS;
      float s = 0.0;
      for (uint i = 0u; i < gl_NumSubgroups; i++)
        s += partial[tid * NSG + i];
      uint di = db + (row0 + r) * pc.d_stride0 + c * pc.d_stride1;
      if (row0 + r < pc.N && c < pc.M)
        d[di] = pc.accumulate != 0u ? d[di] + s : s;
    }
    barrier();
  }
}
