// Tile order (included). tile_order_strips(w) walks the dispatch's tiles in strips w tiles
// wide (0: the plain x-fastest order), so the workgroups in flight cover a tall narrow
// block: in the transposes their reads share src rows and their writes share dst rows (the
// plain order spreads the writes over as many DRAM pages as tiles in flight; H200, f32
// 16384x16384: 3.42 TB/s plain, 3.56 with SWIZZLE 4); in the tiled matmul the workgroups of
// one strip of w rows run together and share those rows in L2.
uvec2 tile_order_strips(uint width) {
  if (width == 0u)
    return gl_WorkGroupID.xy;
  uint gx = gl_NumWorkGroups.x, gy = gl_NumWorkGroups.y;
  uint linear = gl_WorkGroupID.x + gl_WorkGroupID.y * gx;
  uint strip = width * gy, full = gx / width;
  if (linear < full * strip) {
    uint within = linear % strip;
    return uvec2((linear / strip) * width + within % width, within / width);
  }
  uint rest = linear - full * strip, w = gx - full * width;
  return uvec2(full * width + rest % w, rest / w);
}

#ifndef SWIZZLE
#define SWIZZLE 0u
#endif
uvec2 tile_order() { return tile_order_strips(SWIZZLE); }
