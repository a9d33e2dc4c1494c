// The push constants of the quantized matrix-vector kernels (struct qmv_push in
// runtime/ops/quant.c; a disagreement fails the build).
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

// The fused kernels' bits of accumulate (what each means: the kernel's own notes)
bool glu() { return (pc.accumulate & 2u) != 0u; }
bool norm() { return (pc.accumulate & 4u) != 0u; }
