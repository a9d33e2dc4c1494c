/* The weights on the devices: the mapping registered once (the board's import policy),
 * each device's slice of every layer uploaded into its own buffers (Megatron MLP split:
 * W1 rows k0..k1, W2 columns k0..k1), plus the activation buffers. */
#include <string.h>

#include "service.h"

vkrt_status service_load_shards(struct service *svc) {
  vkrt_appliance *app = svc->app;
  const struct weights_file *wf = svc->wf;
  const struct weights_header *wh = &wf->h;
  const uint32_t n = svc->n, ranks = svc->ranks, first = svc->first_rank;
  /* Register the whole mapping (header included: page-aligned start). */
  double t_reg = service_now_s();
  SERVICE_CHECK(app, vkrt_host_register(app, wf->map, wf->map_size, NULL, NULL, &svc->info),
                return s_);
  t_reg = service_now_s() - t_reg;
  svc->registered = true;
  for (uint32_t d = 0; d < n; d++)
    printf("vkrt: dev%u weights via %s: %s\n", d, vkrt_import_path_str(svc->info.path[d]),
           svc->info.reason[d]);
  printf("vkrt-service: registered %.1f MiB in %u chunks in %.3f s\n",
         (double)wf->map_size / (1 << 20), svc->info.chunk_count, t_reg);

  size_t es = weights_type_size(wh->dtype);
  uint64_t matrix = weights_matrix_bytes(wh);
  double t_up = service_now_s();
  for (uint32_t d = 0; d < n; d++) {
    struct device_state *ds = &svc->dev[d];
    ds->k0 = (uint32_t)((uint64_t)wh->ffn * (first + d) / ranks);
    ds->k1 = (uint32_t)((uint64_t)wh->ffn * (first + d + 1) / ranks);
    uint64_t shard = ds->k1 - ds->k0;
    for (uint32_t l = 0; l < wh->layers; l++) {
      const uint8_t *w1 = wf->data + matrix * 2 * l, *w2 = w1 + matrix;
      SERVICE_CHECK(app, vkrt_buffer_create(app, d, shard * wh->hidden * es,
                                            VKRT_BUFFER_DEVICE_LOCAL, &ds->w1[l]), return s_);
      SERVICE_CHECK(app, vkrt_buffer_create(app, d, shard * wh->hidden * es,
                                            VKRT_BUFFER_DEVICE_LOCAL, &ds->w2[l]), return s_);
      /* W1 rows k0..k1 (ne1 = ffn) are contiguous; W2 columns k0..k1 of each of the hidden
       * rows are a strided 2-D region. */
      SERVICE_CHECK(app, vkrt_upload(ds->w1[l], 0, w1 + (uint64_t)ds->k0 * wh->hidden * es,
                                     shard * wh->hidden * es), return s_);
      SERVICE_CHECK(app, vkrt_upload_2d(ds->w2[l], 0, shard * es, w2 + (uint64_t)ds->k0 * es,
                                        (uint64_t)wh->ffn * es, shard * es, wh->hidden),
                    return s_);
      svc->uploaded += 2 * shard * wh->hidden * es;
    }
    SERVICE_CHECK(app, vkrt_buffer_create(app, d, (uint64_t)wh->hidden * 4,
                                          VKRT_BUFFER_DEVICE_LOCAL, &ds->x), return s_);
    SERVICE_CHECK(app, vkrt_buffer_create(app, d, (uint64_t)wh->hidden * 4,
                                          VKRT_BUFFER_DEVICE_LOCAL, &ds->y), return s_);
    SERVICE_CHECK(app, vkrt_buffer_create(app, d, shard * 4, VKRT_BUFFER_DEVICE_LOCAL, &ds->h),
                  return s_);
  }
  svc->upload_s = service_now_s() - t_up;
  printf("vkrt-service: uploaded %.1f MiB of shards in %.3f s (%.2f GB/s)\n",
         (double)svc->uploaded / (1 << 20), svc->upload_s,
         (double)svc->uploaded / svc->upload_s * 1e-9);
  return VKRT_OK;
}

void service_release_shards(struct service *svc) {
  for (uint32_t d = 0; d < VKRT_MAX_DEVICES; d++) {
    struct device_state *ds = &svc->dev[d];
    for (uint32_t l = 0; l < SERVICE_MAX_LAYERS; l++) {
      vkrt_buffer_destroy(ds->w1[l]);
      vkrt_buffer_destroy(ds->w2[l]);
    }
    vkrt_buffer_destroy(ds->x);
    vkrt_buffer_destroy(ds->y);
    vkrt_buffer_destroy(ds->h);
    memset(ds, 0, sizeof(*ds));
  }
  if (svc->registered)
    vkrt_host_unregister(svc->app, svc->wf->map);
  svc->registered = false;
}
