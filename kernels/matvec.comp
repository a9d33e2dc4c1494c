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
// FUSED (vkrt_op_matmul_fused: one column, ROWS even, K a multiple of VEC): bit 1 of
// accumulate walks the rows as pairs (gate row i, then up row N / 2 + i: block b holds pairs
// b ROWS / 2 ...) and writes dst[i] = silu(gate_i x) (up_i x); bit 2 multiplies each x chunk
// by the norm weight g (binding 5, from vec4 pc.norm_offset) as it is loaded and sums x^2 on
// the way (every workgroup reads all of x anyway), the row sums then scaled by
// 1 / sqrt(sum x^2 / K + eps): the norm costs no pass of its own and no extra read of w.
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
  uint accumulate;     // bit 0: dst += result (vkrt_op_matmul_add); FUSED: bits 1, 2 (above)
  uint norm_offset;    // FUSED: the norm weight's first vec4 at binding 5
  float eps;           // FUSED: the norm's epsilon
  uint base_x, base_y, base_z; // last: the grid split (ops.c)
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
#ifdef FUSED
layout(std430, set = 0, binding = 5) readonly buffer G4 { vec4 g4[]; };
shared float squares[NSG];
bool glu() { return (pc.accumulate & 2u) != 0u; }
bool norm() { return (pc.accumulate & 4u) != 0u; }
#endif

float w_scalar(uint row_base16, uint k) {
#ifdef W_F16
  uint h = row_base16 * 8u + k;
  vec2 pair = unpackHalf2x16(w1[h >> 1]);
  return (h & 1u) != 0u ? pair.y : pair.x;
#else
  return w1[row_base16 * 4u + k];
#endif
}

// x's chunk for one 16-byte w chunk: vec4 j (and j + 1 for f16) of column base xc; FUSED
// with the norm, times g and its squares added to sq
void x_chunk(uint xc, uint j, inout float sq, out vec4 xa, out vec4 xb) {
  xa = x4[xc + j];
#ifdef W_F16
  xb = x4[xc + j + 1u];
#else
  xb = vec4(0.0);
#endif
#ifdef FUSED
  if (norm()) {
    sq += dot(xa, xa) + dot(xb, xb);
    xa *= g4[pc.norm_offset + j];
#ifdef W_F16
    xb *= g4[pc.norm_offset + j + 1u];
#endif
  }
#endif
}

// dot of one 16-byte w chunk with its x chunk
float dot_chunk(WVEC wv, vec4 xa, vec4 xb) {
#ifdef W_F16
  return dot(unpackHalf2x16(wv.x), xa.xy) + dot(unpackHalf2x16(wv.y), xa.zw) +
         dot(unpackHalf2x16(wv.z), xb.xy) + dot(unpackHalf2x16(wv.w), xb.zw);
#else
  return dot(wv, xa);
#endif
}

// The w row of row r of the block starting at row0 (clamped to the last: valid memory)
uint w_row_of(uint row0, uint r) {
#ifdef FUSED
  if (glu()) {
    uint pair = min(row0 / 2u + r / 2u, pc.N / 2u - 1u);
    return (r & 1u) != 0u ? pc.N / 2u + pair : pair;
  }
#endif
  return min(row0 + r, pc.N - 1u);
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
      wrow[r] = wb + w_row_of(row0, r) * pc.w_row;
    float acc[ROWS * NCOLS];
    for (uint i = 0u; i < ROWS * NCOLS; i++)
      acc[i] = 0.0;
    float sq = 0.0; // FUSED with the norm: this invocation's share of sum x^2

    uint k = tid;
    for (; k + (UNROLL - 1u) * WG < pc.k_vec; k += UNROLL * WG) {
      WVEC wv[UNROLL * ROWS];
      for (uint u = 0u; u < UNROLL; u++)
        for (uint r = 0u; r < ROWS; r++)
          wv[u * ROWS + r] = w4[wrow[r] + k + u * WG];
      for (uint u = 0u; u < UNROLL; u++)
        for (uint c = 0u; c < NCOLS; c++) {
          vec4 xa, xb;
          x_chunk(xcol[c], (k + u * WG) * XSTEP, sq, xa, xb);
          for (uint r = 0u; r < ROWS; r++)
            acc[r * NCOLS + c] += dot_chunk(wv[u * ROWS + r], xa, xb);
        }
    }
    for (; k < pc.k_vec; k += WG) {
      WVEC wv[ROWS];
      for (uint r = 0u; r < ROWS; r++)
        wv[r] = w4[wrow[r] + k];
      for (uint c = 0u; c < NCOLS; c++) {
        vec4 xa, xb;
        x_chunk(xcol[c], k * XSTEP, sq, xa, xb);
        for (uint r = 0u; r < ROWS; r++)
          acc[r * NCOLS + c] += dot_chunk(wv[r], xa, xb);
      }
    }
    for (uint kk = pc.k_vec * VEC + tid; kk < pc.K; kk += WG) // FUSED: K % VEC == 0, none
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
    float scale = 1.0;
#ifdef FUSED
    float q = subgroupAdd(sq);
    if (subgroupElect())
      squares[gl_SubgroupID] = q;
    barrier();
    if (norm()) { // every workgroup sums the same squares in the same order
      float t = 0.0;
      for (uint i = 0u; i < gl_NumSubgroups; i++)
        t += squares[i];
      scale = inversesqrt(t / float(pc.K) + pc.eps);
    }
    if (glu()) {
      if (tid < ROWS / 2u && row0 / 2u + tid < pc.N / 2u) {
        float sg = 0.0, su = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++) {
          sg += partial[(2u * tid) * NSG + i];
          su += partial[(2u * tid + 1u) * NSG + i];
        }
        sg *= scale;
        su *= scale;
        d[db + (row0 / 2u + tid) * pc.d_stride0] = sg / (1.0 + exp(-sg)) * su;
      }
      barrier();
      continue;
    }
#else
    barrier();
#endif
    if (tid < ROWS * NCOLS) {
      uint r = tid / NCOLS, c = tid % NCOLS;
      float s = 0.0;
      for (uint i = 0u; i < gl_NumSubgroups; i++)
        s += partial[tid * NSG + i];
      s *= scale;
      uint di = db + (row0 + r) * pc.d_stride0 + c * pc.d_stride1;
      if (row0 + r < pc.N && c < pc.M)
        d[di] = (pc.accumulate & 1u) != 0u ? d[di] + s : s;
    }
    barrier();
  }
}
