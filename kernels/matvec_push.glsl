// The push constants of the quantized matrix-vector kernels (struct qmv_push in
// runtime/ops/quant.c; a disagreement fails the build).
#ifndef QKV
layout(push_constant) uniform Push {
  uint N, M, blocks;        // rows, columns of x, blocks per row (K / 32 or K / 256)
  uint w_offset, w_row, w_stride2, w_stride3;                  // bytes
  uint x_offset, x_col, x_stride2, x_stride3;                  // elements
  uint d_offset, d_stride0, d_col, d_stride2, d_stride3;       // elements
  uint ne2, r2, r3;
  uint accumulate;          // VKRT_OPS_PUSH_* bits (runtime/ops/ops.h): 1 dst += the product
                            // (vkrt_op_matmul_add); 2 SwiGLU row pairs, 4 x RMS-normalized
                            // first (vkrt_op_matmul_fused)
  uint norm_offset;         // elements: the norm weight's first (accumulate & 4)
  float eps;                // the RMS norm's (accumulate & 4)
  uint base_x, base_y, base_z; // last: the dispatch fills them in (vkrt_ops_dispatch_3d)
} pc;
#else
// matvec_q8x.comp QKV (struct qmv_qkv_push): one column, one batch, so no strides past a
// row's; then the q/k/v product's RoPE and cache rows. 116 bytes: inside the 128 every
// Vulkan device gives.
layout(push_constant) uniform Push {
  uint N, M, blocks;
  uint w_offset, w_row, x_offset, d_offset, d_stride0;
  uint accumulate, norm_offset;
  float eps;
  uint q_rows, kv_rows;     // query rows (n_head head_dim), K rows = V rows
  uint head_dim, n_dims;
  float theta_scale, freq_scale;
  uint factors, factors_offset; // factors: their stride; 0 none (binding 7: pos's, not read)
  uint pos_offset;          // elements
  uint k_offset, k_row, v_offset, v_row; // bytes: row 0 of each cache and the row pitch
  uint cache_types;         // bit 0: K q8_0 (else f16), bit 1: V q8_0
  uint cache_rows;          // rows of the caches: a position outside is not stored
  uint base_x, base_y, base_z;
} pc;
#endif

// The fused kernels' bits of accumulate (what each means: the kernel's own notes)
bool glu() { return (pc.accumulate & 2u) != 0u; }
bool norm() { return (pc.accumulate & 4u) != 0u; }
