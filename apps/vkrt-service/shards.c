/* vkrt-service's weights on the devices: each device's shard of the ffn (cut along whole
 * quantization blocks), the tensor data section registered once, the shards uploaded from it,
 * and the roofline's copy bandwidth. */
#include "service.h"

/* ffn is cut along whole blocks of every layer's ffn_down (its K): rank r holds rows f0..f1
 * of gate/up and the same columns of down. */
int shards_cut(struct service *s) {
  const struct gguf_mlp *m = s->mlp;
  uint32_t block = 1;
  for (uint32_t l = 0; l < m->layers; l++)
    block = vkrt_type_block(m->down[l]->type) > block ? vkrt_type_block(m->down[l]->type) : block;
  if (m->ffn % block || m->ffn / block < s->ranks) {
    fprintf(stderr, "vkrt-service: ffn %u holds %u blocks of %u, fewer than the %u ranks\n",
            m->ffn, m->ffn / block, block, s->ranks);
    return EXIT_WEIGHTS;
  }
  for (uint32_t d = 0; d < s->n; d++) {
    uint64_t r = s->first_rank + d;
    s->dev[d].f0 = (uint32_t)((uint64_t)(m->ffn / block) * r / s->ranks * block);
    s->dev[d].f1 = (uint32_t)((uint64_t)(m->ffn / block) * (r + 1) / s->ranks * block);
  }
  return 0;
}

/* Registers the tensor data section once: it starts at general.alignment (32 bytes), not at a
 * page; the import widens chunks to pages and uploads straddle chunk edges. */
int shards_register(struct service *s) {
  vkrt_appliance *app = s->app;
  const uint8_t *data = s->wf.buf + s->wf.data_offset;
  uint64_t data_size = s->wf.size - s->wf.data_offset;
  vkrt_register_info info;
  double t_reg = now_s();
  CHECK(vkrt_host_register(app, data, data_size, NULL, NULL, &info));
  t_reg = now_s() - t_reg;
  s->registered = true;
  s->info = info;
  for (uint32_t d = 0; d < s->n; d++)
    printf("vkrt: dev%u weights via %s: %s\n", d, vkrt_import_path_str(info.path[d]), info.reason[d]);
  printf("vkrt-service: registered %.1f MiB in %u chunks in %.3f s\n",
         (double)data_size / (1 << 20), info.chunk_count, t_reg);
  return 0;
}

/* Device d's shard of every layer and its activation buffers; the shard's bytes in *bytes. */
static int shard_upload(struct service *s, uint32_t d, uint64_t *bytes) {
  vkrt_appliance *app = s->app;
  const struct gguf_file *wf = &s->wf;
  const struct gguf_mlp *m = s->mlp;
  struct device_state *ds = &s->dev[d];
  uint64_t shard = ds->f1 - ds->f0;
  *bytes = 0;
  for (uint32_t l = 0; l < m->layers; l++) {
    /* gate/up: rows f0..f1 are contiguous; down: the same columns of every row, a 2-D
     * region of whole blocks. +16 bytes: the kernels read whole words. */
    const struct gguf_tensor *gt = m->gate[l], *ut = m->up[l], *dt = m->down[l];
    uint64_t grow = gguf_row_bytes(gt), urow = gguf_row_bytes(ut), drow = gguf_row_bytes(dt);
    uint64_t dbs = vkrt_type_size(dt->type), dbl = vkrt_type_block(dt->type);
    uint64_t dshard = shard / dbl * dbs;
    CHECK(vkrt_buffer_create(app, d, shard * grow + 16, VKRT_BUFFER_DEVICE_LOCAL, &ds->gate[l]));
    CHECK(vkrt_buffer_create(app, d, shard * urow + 16, VKRT_BUFFER_DEVICE_LOCAL, &ds->up[l]));
    CHECK(vkrt_buffer_create(app, d, dshard * m->hidden + 16, VKRT_BUFFER_DEVICE_LOCAL, &ds->down[l]));
    CHECK(vkrt_upload(ds->gate[l], 0, gguf_data(wf, gt) + ds->f0 * grow, shard * grow));
    CHECK(vkrt_upload(ds->up[l], 0, gguf_data(wf, ut) + ds->f0 * urow, shard * urow));
    CHECK(vkrt_upload_2d(ds->down[l], 0, dshard, gguf_data(wf, dt) + ds->f0 / dbl * dbs, drow,
                         dshard, m->hidden));
    *bytes += shard * (grow + urow) + dshard * m->hidden;
  }
  CHECK(vkrt_buffer_create(app, d, (uint64_t)m->hidden * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->x));
  CHECK(vkrt_buffer_create(app, d, (uint64_t)m->hidden * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->y));
  CHECK(vkrt_buffer_create(app, d, shard * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->g));
  CHECK(vkrt_buffer_create(app, d, shard * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->u));
  CHECK(vkrt_buffer_create(app, d, (uint64_t)m->hidden * 4, VKRT_BUFFER_HOST_VISIBLE, &ds->x_in));
  void *map = NULL;
  CHECK(vkrt_buffer_map(ds->x_in, &map));
  ds->x_in_map = map;
  return 0;
}

int shards_upload(struct service *s) {
  double t_up = now_s();
  for (uint32_t d = 0; d < s->n; d++) {
    uint64_t dev_bytes;
    int rc = shard_upload(s, d, &dev_bytes);
    if (rc)
      return rc;
    s->uploaded += dev_bytes;
    s->shard_bytes = dev_bytes > s->shard_bytes ? dev_bytes : s->shard_bytes;
  }
  s->t_up = now_s() - t_up;
  printf("vkrt-service: uploaded %.1f MiB of shards in %.3f s (%.2f GB/s)\n",
         (double)s->uploaded / (1 << 20), s->t_up, (double)s->uploaded / s->t_up * 1e-9);
  return 0;
}

/* The roofline: every device reads its shard of the weights once per token, at the bandwidth
 * of a plain device copy measured here (read + written bytes per second; 0 when the second
 * buffer does not fit). The copies run back to back for 300 ms first: an idle H200 starts
 * at a fraction of its clock (a cold measurement read 1.6 instead of 4.2 TB/s). */
int shards_measure_copy(struct service *s) {
  vkrt_appliance *app = s->app;
  uint64_t csize = s->shard_bytes / 4;
  csize = csize < (16u << 20) ? (16u << 20) : csize > (512u << 20) ? (512u << 20) : csize;
  csize &= ~(uint64_t)4095;
  vkrt_buffer *ca = NULL, *cb = NULL;
  CHECK(vkrt_buffer_create(app, 0, csize, VKRT_BUFFER_DEVICE_LOCAL, &ca));
  if (vkrt_buffer_create(app, 0, csize, VKRT_BUFFER_DEVICE_LOCAL, &cb) == VKRT_OK) {
    vkrt_tensor ta = vkrt_tensor_contiguous(ca, 0, VKRT_TYPE_F32, 1024, (int64_t)(csize / 4096), 1, 1);
    vkrt_tensor tb = vkrt_tensor_contiguous(cb, 0, VKRT_TYPE_F32, 1024, (int64_t)(csize / 4096), 1, 1);
    double best = 0, warm_end = now_s() + 0.3;
    while (now_s() < warm_end)
      if (vkrt_op_copy(&tb, &ta) != VKRT_OK || vkrt_finish(app, 0) != VKRT_OK)
        break;
    for (int i = 0; i < 6; i++) {
      double t0 = now_s();
      if (vkrt_op_copy(&tb, &ta) != VKRT_OK || vkrt_finish(app, 0) != VKRT_OK)
        break;
      double t = now_s() - t0;
      if (i > 0 && (best == 0 || t < best))
        best = t;
    }
    s->copy_bw = best > 0 ? 2.0 * (double)csize / best : 0;
  }
  vkrt_buffer_destroy(ca);
  vkrt_buffer_destroy(cb);
  return 0;
}
