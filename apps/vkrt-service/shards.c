/* vkrt-service's weights on the devices: each device's shard of the ffn (cut along whole
 * quantization blocks), every device's shard loaded from the file at once (vkrt_load_file),
 * the pinned host-to-device rate it is measured against, and the roofline's copy bandwidth. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../tools/pinned.h"
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

/* Device d's shard of every layer (ranges of the file appended at *n) and its activation
 * buffers; the shard's bytes in *bytes. */
static int shard_upload(struct service *s, uint32_t d, vkrt_load_range *ranges, uint32_t *n,
                        uint64_t *bytes) {
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
    const uint64_t at = wf->data_offset;
    ranges[(*n)++] = (vkrt_load_range){.file_offset = at + gt->offset + ds->f0 * grow,
                                       .size = shard * grow, .dst = ds->gate[l]};
    ranges[(*n)++] = (vkrt_load_range){.file_offset = at + ut->offset + ds->f0 * urow,
                                       .size = shard * urow, .dst = ds->up[l]};
    ranges[(*n)++] = (vkrt_load_range){.file_offset = at + dt->offset + ds->f0 / dbl * dbs,
                                       .size = dshard, .dst = ds->down[l], .rows = m->hidden,
                                       .file_pitch = drow, .dst_pitch = dshard};
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

/* Every device's shard in one vkrt_load_file: all devices in flight at once. */
int shards_upload(struct service *s) {
  static vkrt_load_range ranges[VKRT_MAX_DEVICES * MAX_LAYERS * 3];
  uint32_t n = 0;
  for (uint32_t d = 0; d < s->n; d++) {
    uint64_t dev_bytes;
    int rc = shard_upload(s, d, ranges, &n, &dev_bytes);
    if (rc)
      return rc;
    s->uploaded += dev_bytes;
    s->shard_bytes = dev_bytes > s->shard_bytes ? dev_bytes : s->shard_bytes;
  }
  vkrt_appliance *app = s->app;
  double t_up = now_s();
  s->load_t0 = t_up;
  CHECK(vkrt_load_file(app, s->args->weights_path, -1, ranges, n, s->args->load_path,
                       shards_load_progress, s, &s->load));
  s->t_up = now_s() - t_up;
  shards_load_report(s);
  return 0;
}

int shards_measure_h2d(struct service *s) {
  const uint64_t size = 256ull << 20;
  void *host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  s->h2d_bw = s->h2d_all_bw = 0;
  if (host == MAP_FAILED)
    return 0; /* no yardstick: the ratio is not printed */
  memset(host, 0x5a, size);
  if (vkrt_host_register(s->app, host, size, NULL, NULL, NULL) == VKRT_OK) {
    s->h2d_bw = tool_pinned_rate(s->app, host, size, 1);
    /* devices that share a GPU share its copy engines: a load into all of them is measured
       against what they take at once too */
    s->h2d_all_bw = s->n > 1 ? tool_pinned_rate(s->app, host, size, s->n) : 0;
    vkrt_host_unregister(s->app, host);
  }
  munmap(host, size);
  if (s->h2d_bw > 0)
    printf("vkrt-service: pinned host-to-device upload (256 MiB registered, dev0): %.2f GB/s\n",
           s->h2d_bw * 1e-9);
  if (s->h2d_all_bw > 0)
    printf("vkrt-service: pinned host-to-device upload into all %u devices at once: %.2f GB/s\n",
           s->n, s->h2d_all_bw * 1e-9);
  return 0;
}

void shards_load_progress(void *user, uint64_t done, uint64_t total) {
  struct service *s = user;
  if (!isatty(STDERR_FILENO))
    return;
  double now = now_s();
  if (done < total && now - s->load_shown < 0.1)
    return;
  s->load_shown = now;
  double rate = now > s->load_t0 ? (double)done / (now - s->load_t0) : 0;
  fprintf(stderr, "\rvkrt-service: loading %.2f / %.2f GiB, %.2f GB/s, ETA %.1f s   %s",
          (double)done / (1 << 30), (double)total / (1 << 30), rate * 1e-9,
          rate > 0 ? (double)(total - done) / rate : 0.0, done == total ? "\n" : "");
}

static double load_gbps(const struct service *s) {
  return s->load.ns ? (double)s->load.bytes / (double)s->load.ns : 0;
}

/* ", R x the pinned host-to-device rate (...)" and the same into all devices; nothing before
 * the pinned rate is measured. */
static void print_load_ratios(const struct service *s) {
  const double gbs = load_gbps(s);
  if (s->h2d_bw > 0)
    printf(", %.2f x the pinned host-to-device rate (%.2f GB/s)", gbs / (s->h2d_bw * 1e-9),
           s->h2d_bw * 1e-9);
  if (s->h2d_all_bw > 0)
    printf(", %.2f x that into all %u devices at once (%.2f GB/s)", gbs / (s->h2d_all_bw * 1e-9),
           s->n, s->h2d_all_bw * 1e-9);
}

void shards_load_ratio_report(const struct service *s) {
  if (!s->load.ns || s->h2d_bw <= 0)
    return;
  printf("vkrt-service: the load's %.2f GB/s against the pinned rate measured after the run",
         load_gbps(s));
  print_load_ratios(s);
  printf("\n");
}

void shards_load_report(const struct service *s) {
  const vkrt_load_info *l = &s->load;
  const double gbs = load_gbps(s);
  printf("vkrt-service: loaded %.1f MiB of shards from the file in %.3f s: %.2f GB/s",
         (double)l->bytes / (1 << 20), (double)l->ns * 1e-9, gbs);
  print_load_ratios(s);
  printf("; %u threads", l->threads);
  if (l->resident >= 0)
    printf(", page cache held %.0f%% of the file", l->resident * 100);
  printf("\n");
  if (l->pinned_chunks) /* where the time went: reads, DMA, or neither */
    printf("vkrt-service: load structure: %u fills of %llu KiB pinned chunks (ring of %u) in %u "
           "submissions, "
           "%.1f MiB read, %llu DMA regions, %.1f MiB of narrow rows by 2D copies into row images "
           "(%u ranges), %.1f MiB packed (%.1f by the readers as they read), %.1f MiB in regions "
           "of their own; setup %.1f ms (page-cache check %.1f), chunk imports %.1f ms, readers "
           "busy %.0f%%, waits for the DMA %.1f ms (summed over threads), for reads "
           "%.1f ms, tail %.1f ms, release %.1f ms\n", l->chunk_fills,
           (unsigned long long)(l->pinned_chunk_bytes >> 10), l->pinned_chunks, l->submits,
           (double)l->read_bytes / (1 << 20), (unsigned long long)l->copies,
           (double)l->row_image_bytes / (1 << 20), l->row_images,
           (double)l->gathered_bytes / (1 << 20),
           (double)l->packed_while_reading_bytes / (1 << 20),
           (double)l->row_region_bytes / (1 << 20),
           (double)l->setup_ns * 1e-6, (double)l->resident_ns * 1e-6, (double)l->import_ns * 1e-6,
           l->ns ? (double)l->read_busy_ns * 100 / ((double)l->ns * l->threads) : 0.0,
           (double)l->wait_dma_ns * 1e-6, (double)l->wait_read_ns * 1e-6,
           (double)l->tail_ns * 1e-6, (double)l->release_ns * 1e-6);
  for (uint32_t d = 0; d < s->n; d++)
    printf("vkrt: dev%u weights via %s: %s\n", d, vkrt_load_path_str(s->load.path[d]),
           s->load.reason[d]);
  if (s->load.chunk_count)
    printf("vkrt-service: registered the %.1f MiB file in %u chunks\n",
           (double)s->load.file_size / (1 << 20), s->load.chunk_count);
}

void shards_load_json(const struct service *s) {
  const double gbs = load_gbps(s), pinned = s->h2d_bw * 1e-9, all = s->h2d_all_bw * 1e-9;
  printf(", \"load_gbps\": %.3f, \"pinned_h2d_gbps\": %.3f, \"load_vs_pinned\": %.3f, "
         "\"pinned_all_devices_gbps\": %.3f, \"load_vs_pinned_all\": %.3f, "
         "\"load_path\": \"%s\", \"load_seconds\": %.4f, \"load_bytes\": %llu, "
         "\"resident\": %.3f", gbs, pinned, pinned > 0 ? gbs / pinned : 0, all,
         all > 0 ? gbs / all : 0,
         vkrt_load_path_str(s->load.path[0]), (double)s->load.ns * 1e-9,
         (unsigned long long)s->load.bytes, s->load.resident);
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
