// Tile order for the transposes (included). With SWIZZLE defined, the dispatch's tiles are
// walked in strips SWIZZLE tiles wide, so the workgroups in flight cover a tall narrow
// block: their reads share src rows and their writes share dst rows (the plain x-fastest
// order spreads the writes over as many DRAM pages as tiles in flight). H200, f32
// 16384x16384: 3.42 TB/s plain, 3.56 with SWIZZLE 4.
uvec2 tile_order() {
  uint tx = gl_WorkGroupID.x, ty = gl_WorkGroupID.y;
#ifdef SWIZZLE
  uint gx = gl_NumWorkGroups.x, gy = gl_NumWorkGroups.y;
  uint linear = tx + ty * gx;
  uint strip = SWIZZLE * gy, full = gx / SWIZZLE;
  if (linear < full * strip) {
    uint within = linear % strip;
    tx = (linear / strip) * SWIZZLE + within % SWIZZLE;
    ty = within / SWIZZLE;
  } else {
    uint rest = linear - full * strip, w = gx - full * SWIZZLE;
    tx = full * SWIZZLE + rest % w;
    ty = rest / w;
  }
#endif
  return uvec2(tx, ty);
}
