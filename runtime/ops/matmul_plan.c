/* The tiled matmul's setup per device and the path of each call: pure functions over the
 * capability snapshot (tests/unit/test_matmul_plan.c drives them with hand-built devices). */
#include "ops/ops.h"

bool vkrt_matmul_coopmat_capable(const struct vkrt_caps *caps) {
  /* kernels/matmul.comp COOPMAT maps 32-wide subgroups onto its tile */
  return caps->cooperative_matrix && caps->subgroup_size == 32;
}

/* The quantized matrix-vector kernels' 16-row variants (prefetch-rows-a, quant.c) give each
 * workgroup 16 rows: on the H200 (132 SMs; vkrt-bench cases --variants, 2026-12-04) they
 * lost at N 1024 (q4_K 6.50 us against kspace's 5.15, q8_0 6.28 against 5.77) and won from
 * N 4096 (q4_K 8.40 against 9.97, q8_0 10.54 against 11.48): 16 rows per SM and more. */
bool vkrt_quant_rows_fill(const struct vkrt_caps *caps, uint32_t N, uint32_t rows_per_unit) {
  return caps->compute_units == 0 || (uint64_t)N >= (uint64_t)rows_per_unit * caps->compute_units;
}

/* Crossovers and tiles per device.
 * NVIDIA, from H200 sweeps (vkrt-bench cases --tiles over prompt.txt and crossover.txt,
 * with and without --activations f16, and --min-m 2 / --min-m 64 for both sides of the
 * crossover; CHANGELOG.md, 2026-12-04; K 4096 x N 14336 unless said). The quantized
 * crossovers are from the run with the several-column kernels (kernels/matvec_q_cols.comp):
 * - cooperative matrices: q8_0 M = 5 tiled 89.2 us against the matrix-vector kernels' 87.1,
 *   M = 8 89.7 against 87.8 (K 5120: M = 2 109.5 against 44.2, M = 4 108.4 against 72.7);
 *   q4_K M = 8 91.5 against 89.6 (K 5120: 118.9 against 111.0), M = 12 (crossover.txt) 153.8
 *   on the matrix-vector kernels; f16 M = 8 70.8 and 98.1 in two runs against 88.9, M = 12
 *   99.2 against 127.3: tiled from M = 9 (q8_0, q4_K: past the matrix-vector kernels' 8, by
 *   2 % for q8_0 and q4_K at M = 8), 9 (f16). Tiles: 32 x 16 with 64-k
 *   steps up to M = 16 (q8_0 M = 12 91.4 us, 128 x 128 230.9; 128-k steps lost on an H100,
 *   f16 65 -> 97, q4_K 74 -> 114), 128 x 32 up to 32 (f16 M = 32 87.3 us; q4_K 121.5, 64 x 32
 *   115.1), in 128-k steps since the results' scratch moved into the w buffers (H100: q4_K
 *   M = 32 117.0 -> 103.2 us, f16 89.0 -> 90.8, K 14336 x N 4096 f16 88.2 -> 88.3; 64 x 32
 *   on 4 or 8 subgroups 120-170), 256 x 128 on 16 subgroups of 4 x 2
 *   accumulators with 32-k steps beyond (H100, x and w16 in f16, one process per tile, GPU
 *   us, 2026-12-06: M = 512 f16 414 against 490 for 128 x 128 on 4 subgroups of 4 x 4, q4_K
 *   469 / 542, q8_0 477 / 549, K 14336 x N 4096 397 / 454, the q6_K head 4445 / 5361; M 256
 *   q4_K 292 / 311, M 128 f16 135 / 143, but q4_K M 64 194 / 186 and M 128 205 / 191). 64-k
 *   steps (256 x 128 on 8 subgroups 506-536) and two buffers with the loads two steps ahead
 *   (589-675) were slower.
 * - portable: q8_0 M = 8 tiled 146.7 us against 87.8, q4_K 162.4 against 89.6 (K 5120:
 *   172.8 against 111.0); f16 M = 16 on the matrix-vector kernels 165.9, M = 24 tiled 165.6
 *   against 241.8: tiled from M = 9 (q8_0, q4_K: past the matrix-vector kernels' 8), 17
 *   (f16); f32 weights, twice f16's bytes for the matrix-vector kernels and the same tiles,
 *   from 17 (not measured).
 *   Tiles 32 x 16 up to M = 16 (q8_0 M = 12 149.2 us), 64 x 32 with 4 x 4 outputs per
 *   invocation up to 32 (f16 M = 32 166.8, 32 x 32 230.7), 128 x 128 with 8 x 4 beyond
 *   (M = 512: f16 1780 us, q8_0 1805, q4_K 1955).
 * - split K (per_unit, the workgroups of each tile the plan takes as resident per SM; H100,
 *   vkrt-bench cases with MATMUL_SPLIT_K forced to 1, 2, 4, 8 and planned, 2026-12-06, GPU
 *   us): cooperative-matrix large tile K 14336 x N 4096 M 512 (128 workgroups) f16 537 ->
 *   431 in 2 pieces (4 and 8: 445), q8_0 650 -> 529, q4_K 781 -> 651, q6_K 747 -> 550; K
 *   4096 x N 14336 (448) no gain: 2. Medium tile M 32 K 14336 x N 4096 (32 workgroups) f16
 *   291 -> 87 in 4 (2: 150), q4_K 398 -> 113; K 4096 x N 14336 (112) lost (f16 87 -> 95-99,
 *   q4_K 113 -> 121-130): 1. Small tile M 12-16 (448) f16 98 -> 88-92, q8_0 89 -> 80-82,
 *   q4_K 95 -> 85-88 in 4-8 pieces: 8. Portable large tile (arithmetic-bound) no gain at K
 *   14336 (f16 1846 / 1862): 1; medium K 14336 M 32 f16 775 -> 309, q4_K 426 -> 269, K 4096
 *   M 24-32 mixed (f16 -3 %, q8_0 and q4_K +9-10 %): 1; small M 12-16 q8_0 148 -> 127,
 *   q4_K 166 -> 139: 16.
 * Other devices (lavapipe included; not measured): the matrix-vector kernels up to M = 8,
 * portable tiles of 32 x 16, 64 x 32 and 64 x 64 (2, 4 x 2 and 4 x 4 outputs per
 * invocation), K never split. */
void vkrt_matmul_setup_init(const struct vkrt_caps *caps, struct vkrt_matmul_setup *out) {
  bool nv = caps->vendor_id == 0x10de && !caps->is_cpu;
  out->coopmat = vkrt_matmul_coopmat_capable(caps);
  for (int p = 0; p < 2; p++)
    for (int t = 0; t < VKRT_TYPE_COUNT; t++)
      out->min_m[p][t] = VKRT_OPS_MATVEC_MAX_M + 1;
  if (nv) {
    out->min_m[0][VKRT_TYPE_F32] = 17;
    out->min_m[0][VKRT_TYPE_F16] = 17;
    out->min_m[1][VKRT_TYPE_F16] = 9;
  }
  out->min_m[1][VKRT_TYPE_F32] = out->min_m[0][VKRT_TYPE_F32]; /* f32 w stays portable */
  static const struct vkrt_matmul_tile nv_portable[VKRT_MATMUL_SIZES] = {
      {64, 32, 16, 2, 32, 1, .per_unit = 16}, {128, 64, 32, 4, 32, 1, .per_unit = 1},
      {256, 128, 128, 8, 32, 1, .per_unit = 1}};
  static const struct vkrt_matmul_tile other_portable[VKRT_MATMUL_SIZES] = {
      {64, 32, 16, 2, 32, 1}, {256, 64, 32, 4, 32, 1}, {256, 64, 64, 4, 32, 1}};
  static const struct vkrt_matmul_tile coopmat[VKRT_MATMUL_SIZES] = {
      {64, 32, 16, 1, 64, 1, .per_unit = 8}, {256, 128, 32, 2, 128, 1, .per_unit = 1},
      {512, 256, 128, 4, 32, 1, .per_unit = 2}};
  for (int i = 0; i < VKRT_MATMUL_SIZES; i++) {
    out->tile[0][i] = nv ? nv_portable[i] : other_portable[i];
    out->tile[1][i] = coopmat[i];
  }
  /* a device whose limits (workgroup size, shared memory) do not take a tile of the plan
   * keeps the kernels it can run: the portable tiles instead of the cooperative-matrix ones,
   * the matrix-vector kernels instead of the portable tiles */
  out->coopmat_refused = out->portable_refused = NULL;
  for (int i = 0; i < VKRT_MATMUL_SIZES; i++) {
    const char *why = vkrt_matmul_tile_check(caps, false, &out->tile[0][i]);
    if (why && !out->portable_refused)
      out->portable_refused = why;
    why = out->coopmat ? vkrt_matmul_tile_check(caps, true, &out->tile[1][i]) : NULL;
    if (why && !out->coopmat_refused)
      out->coopmat_refused = why, out->coopmat = false;
  }
  if (out->portable_refused) {
    for (int t = 0; t < VKRT_TYPE_COUNT; t++)
      out->min_m[0][t] = UINT32_MAX;
    out->min_m[1][VKRT_TYPE_F32] = UINT32_MAX; /* f32 w runs on the portable tiles only */
  }
}

void vkrt_matmul_w16_min_m_init(uint32_t min_m[VKRT_TYPE_COUNT]) {
  for (int t = 0; t < VKRT_TYPE_COUNT; t++)
    min_m[t] = UINT32_MAX;
  min_m[VKRT_TYPE_Q8_0] = VKRT_MATMUL_W16_MIN_M_Q8_0;
  min_m[VKRT_TYPE_Q4_K] = VKRT_MATMUL_W16_MIN_M_Q4_K;
  min_m[VKRT_TYPE_Q6_K] = VKRT_MATMUL_W16_MIN_M_Q6_K;
}

/* A workgroup of the tiled kernel walks K in dependent steps of bk, each waiting on its
 * global loads (the tiled floor of 70-100 us at K 4096 on the H200, ~1.3 us a step): where
 * the grid fills the device about once or less, the longest chain of steps is the time. K
 * cut into s pieces gives s times the workgroups, each 1/s of the chain, and the partial sums
 * are then added by the reduce kernel. Cost in steps: waves x steps per piece, waves =
 * groups s over the resident workgroups (units x per_unit); a split must save a quarter of
 * the whole chain (its pieces are written and read again, and the reduce is one more
 * dependent dispatch), so a grid that fills the device twice or more, its waves only
 * rounded up, stays whole. The cheapest s, the fewer on a tie. */
uint32_t vkrt_matmul_split_k_chunk(uint32_t K, uint32_t bk, uint32_t s, uint32_t *pieces) {
  uint32_t chunk = s > 1 ? (uint32_t)vkrt_align_up(((uint64_t)K + s - 1) / s, bk) : K;
  *pieces = chunk ? (uint32_t)(((uint64_t)K + chunk - 1) / chunk) : 1;
  if (*pieces <= 1)
    *pieces = 1, chunk = K;
  return chunk;
}

uint32_t vkrt_matmul_split_k(uint32_t compute_units, const struct vkrt_matmul_tile *t, uint32_t K,
                             uint64_t groups, uint32_t max_splits, uint32_t *k_chunk) {
  *k_chunk = K;
  uint64_t slots = (uint64_t)compute_units * t->per_unit;
  if (!slots || !groups || !t->bk || K <= t->bk)
    return 1;
  uint32_t best = 1, best_chunk = K;
  uint64_t best_cost = UINT64_MAX;
  for (uint32_t s = 1; s <= max_splits && s <= VKRT_MATMUL_MAX_SPLITS; s++) {
    uint32_t pieces, chunk = vkrt_matmul_split_k_chunk(K, t->bk, s, &pieces);
    if (pieces != s)
      continue; /* pieces of whole steps cannot make s of them */
    uint64_t waves = (groups * s + slots - 1) / slots;
    uint64_t cost = waves * ((chunk + t->bk - 1) / t->bk); /* steps, the last maybe short */
    if (s > 1)
      cost = cost + cost / 3 + 2; /* 3/4 of it must be below the whole chain */
    if (cost < best_cost)
      best = s, best_chunk = chunk, best_cost = cost;
  }
  if (best > 1)
    *k_chunk = best_chunk;
  return best;
}

const char *vkrt_matmul_tile_check(const struct vkrt_caps *caps, bool coopmat,
                                   const struct vkrt_matmul_tile *t) {
  if (!t->wg || !t->bm || !t->bn || !t->rm)
    return "every field must be >= 1";
  if (t->bk % 32 || t->bk < 32 || t->bk > 128)
    return "bk must be 32, 64, 96 or 128";
  if (t->stages < 1 || t->stages > 2)
    return "stages must be 1 or 2";
  if (t->parts > 2)
    return "parts must be 0, 1 (no multiply) or 2 (no loads after the first step)";
  if (t->order > 64)
    return "order must be 0 (x-fastest) or strips of 1..64 row tiles";
  if (t->wg > caps->max_compute_work_group_invocations)
    return "wg exceeds maxComputeWorkGroupInvocations";
  /* units of 8 k each invocation holds in registers for the steps ahead (stages of them) */
  uint64_t units = (t->bm * (t->bk / 8) + t->wg - 1) / t->wg + (t->bn * (t->bk / 8) + t->wg - 1) / t->wg;
  if (units * t->stages > 16)
    return "more than 16 units of 8 k of w and x in each invocation's registers (bm, bn or "
           "bk too large for wg; two stages hold two steps)";
  uint64_t shared;
  if (coopmat) { /* kernels/matmul.comp COOPMAT: 32-wide subgroups, 16x16 accumulators */
    uint32_t sub = t->wg / 32;
    if (t->wg % 32 || sub % t->rm)
      return "wg must be 32 x a multiple of rm (subgroups along m)";
    uint32_t warps_n = sub / t->rm;
    if (t->bm % (16 * warps_n) || t->bn % (16 * t->rm))
      return "bm must be a multiple of 16 x (wg / 32 / rm), bn of 16 x rm";
    uint64_t row_bytes = (uint64_t)(t->bk + 8) * 2 * t->stages; /* halves, all stages */
    shared = (t->bm + t->bn) * row_bytes;
    /* results not stored straight to dst pass through the w buffers: 1 KiB a subgroup */
    if (t->bm * row_bytes < (uint64_t)sub * 1024)
      return "the w tiles (bm x (bk + 8) halves x stages) must hold 1 KiB of results per "
             "subgroup";
  } else {
    if (t->bm % t->rm || t->wg % (t->bm / t->rm) || t->bn % (t->wg / (t->bm / t->rm)))
      return "rm must divide bm, bm / rm divide wg, and wg / (bm / rm) divide bn";
    shared = (uint64_t)(t->bm + t->bn) * (t->bk + 4) * 4 * t->stages;
  }
  if (shared > caps->max_compute_shared_memory_size)
    return "tiles exceed maxComputeSharedMemorySize";
  return NULL;
}

struct vkrt_matmul_pick vkrt_matmul_pick(const struct vkrt_matmul_setup *setup, bool use_coopmat,
                                         vkrt_type t, uint32_t M) {
  bool cm = use_coopmat && setup->coopmat && t != VKRT_TYPE_F32;
  const struct vkrt_matmul_tile *tiles = setup->tile[cm];
  int size = M <= tiles[VKRT_MATMUL_SMALL].bn    ? VKRT_MATMUL_SMALL
             : M <= tiles[VKRT_MATMUL_MEDIUM].bn ? VKRT_MATMUL_MEDIUM
                                                 : VKRT_MATMUL_LARGE;
  return (struct vkrt_matmul_pick){.tiled = (unsigned)t < VKRT_TYPE_COUNT && M >= setup->min_m[cm][t],
                                   .coopmat = cm,
                                   .tile = &tiles[size]};
}
