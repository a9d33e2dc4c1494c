/* Collective front end: plans and creates the transport at open, validates allreduce
 * arguments, handles the one-device case, and holds what every transport shares (CPU reduce
 * in a fixed rank order, bounded timeline waits, stream copies). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "transport/collective.h"
#include "transport/transport.h"

#define WAIT_SPIN_NS 20000ull /* bounded spin on the counter before blocking (H200: 12 us) */

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() ((void)0)
#endif

/* ---- f16 and the CPU reduce -------------------------------------------------------------- */

float vkrt_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { /* subnormal: normalize */
      exp = 113;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        exp--;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t vkrt_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof(x));
  uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) /* inf, NaN (kept quiet) */
    return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0));
  if (absx >= 0x477ff000u) /* >= 65520 rounds to infinity */
    return (uint16_t)(sign | 0x7c00u);
  if (absx < 0x38800000u) { /* below the smallest normal: subnormal or zero */
    if (absx < 0x33000000u)
      return (uint16_t)sign;
    uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1)))
      r++;
    return (uint16_t)(sign | r);
  }
  uint32_t r = (absx >> 13) - (112u << 10), rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1)))
    r++; /* a carry into the exponent is the correct rounding */
  return (uint16_t)(sign | r);
}

#define REDUCE_BLOCK 2048

void vkrt_collective_reduce_cpu(vkrt_type type, void *dst, const void *const *src, uint32_t n,
                                uint64_t count) {
  /* Element-wise ((s0 + s1) + s2) + ...: the same order for every element and every rank.
   * Blocked so each rank's pass streams through memory and vectorizes. */
  float acc[REDUCE_BLOCK];
  for (uint64_t i = 0; i < count; i += REDUCE_BLOCK) {
    size_t len = (size_t)VKRT_MIN((uint64_t)REDUCE_BLOCK, count - i);
    if (type == VKRT_TYPE_F32) {
      memcpy(acc, (const float *)src[0] + i, len * sizeof(float));
      for (uint32_t r = 1; r < n; r++) {
        const float *s = (const float *)src[r] + i;
        for (size_t j = 0; j < len; j++)
          acc[j] += s[j];
      }
      memcpy((float *)dst + i, acc, len * sizeof(float));
    } else {
      const uint16_t *s0 = (const uint16_t *)src[0] + i;
      for (size_t j = 0; j < len; j++)
        acc[j] = vkrt_f16_to_f32(s0[j]);
      for (uint32_t r = 1; r < n; r++) {
        const uint16_t *s = (const uint16_t *)src[r] + i;
        for (size_t j = 0; j < len; j++)
          acc[j] += vkrt_f16_to_f32(s[j]);
      }
      uint16_t *d = (uint16_t *)dst + i;
      for (size_t j = 0; j < len; j++)
        d[j] = vkrt_f32_to_f16(acc[j]);
    }
  }
}

/* ---- a small pool for large CPU reduces --------------------------------------------------
 * One thread sums ~3-6 GB/s; a large piece is split across a few threads (static ranges of
 * whole blocks). Each element is still summed in rank order by exactly one thread, so the
 * result is the same bits as vkrt_collective_reduce_cpu. */

#define POOL_MIN_BYTES (1ull << 20) /* below this, waking workers costs more than it saves */

struct pool_worker_arg;

struct vkrt_reduce_pool {
  struct vkrt_base *base;
  uint32_t threads; /* workers + the caller */
  pthread_t worker[VKRT_REDUCE_POOL_MAX];
  struct pool_worker_arg *worker_arg[VKRT_REDUCE_POOL_MAX];
  uint32_t started;
  pthread_mutex_t lock;
  pthread_cond_t work, done;
  uint64_t generation;
  uint32_t pending;
  bool stop;
  /* the current job */
  vkrt_type type;
  void *dst;
  const void *const *src;
  uint32_t n;
  uint64_t count;
};

static void pool_range(const struct vkrt_reduce_pool *p, uint32_t part, uint64_t *first,
                       uint64_t *count) {
  uint64_t blocks = (p->count + REDUCE_BLOCK - 1) / REDUCE_BLOCK;
  uint64_t b0 = blocks * part / p->threads, b1 = blocks * (part + 1) / p->threads;
  *first = VKRT_MIN(b0 * REDUCE_BLOCK, p->count);
  *count = VKRT_MIN(b1 * REDUCE_BLOCK, p->count) - *first;
}

static void pool_part(const struct vkrt_reduce_pool *p, uint32_t part) {
  uint64_t first, count;
  pool_range(p, part, &first, &count);
  if (!count)
    return;
  size_t esize = p->type == VKRT_TYPE_F32 ? 4 : 2;
  const void *src[VKRT_MAX_DEVICES];
  for (uint32_t r = 0; r < p->n; r++)
    src[r] = (const uint8_t *)p->src[r] + first * esize;
  vkrt_collective_reduce_cpu(p->type, (uint8_t *)p->dst + first * esize, src, p->n, count);
}

struct pool_worker_arg {
  struct vkrt_reduce_pool *pool;
  uint32_t part;
};

static void *pool_main(void *arg) {
  struct vkrt_reduce_pool *p = ((struct pool_worker_arg *)arg)->pool;
  uint32_t part = ((struct pool_worker_arg *)arg)->part;
  uint64_t seen = 0;
  pthread_setname_np(pthread_self(), "vkrt-reduce");
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (p->generation == seen && !p->stop)
      pthread_cond_wait(&p->work, &p->lock);
    if (p->stop)
      break;
    seen = p->generation;
    pthread_mutex_unlock(&p->lock);
    pool_part(p, part);
    pthread_mutex_lock(&p->lock);
    if (--p->pending == 0)
      pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

vkrt_status vkrt_reduce_pool_create(struct vkrt_base *base, uint32_t threads,
                                    struct vkrt_reduce_pool **out) {
  *out = NULL;
  threads = VKRT_MIN(threads, (uint32_t)VKRT_REDUCE_POOL_MAX);
  if (threads < 2)
    return VKRT_OK; /* no pool: the caller sums alone */
  struct vkrt_reduce_pool *p = vkrt_calloc(base, 1, sizeof(*p));
  if (!p)
    return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "reduce pool: out of host memory");
  p->base = base;
  p->threads = threads;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, NULL);
  for (uint32_t w = 1; w < threads; w++) {
    /* each worker gets its own heap argument so two pools never share one */
    struct pool_worker_arg *arg = vkrt_alloc(base, sizeof(*arg));
    if (!arg) {
      vkrt_reduce_pool_destroy(p);
      return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "reduce pool: out of host memory");
    }
    *arg = (struct pool_worker_arg){p, w};
    int e = pthread_create(&p->worker[w - 1], NULL, pool_main, arg);
    if (e != 0) {
      vkrt_free(base, arg);
      vkrt_reduce_pool_destroy(p);
      return vkrt_error(base, VKRT_ERROR_INTERNAL, "reduce pool: pthread_create failed (%d)", e);
    }
    p->started = w;
    p->worker_arg[w - 1] = arg;
  }
  *out = p;
  return VKRT_OK;
}

void vkrt_reduce_pool_destroy(struct vkrt_reduce_pool *p) {
  if (!p)
    return;
  pthread_mutex_lock(&p->lock);
  p->stop = true;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
  for (uint32_t w = 0; w < p->started; w++) {
    pthread_join(p->worker[w], NULL);
    vkrt_free(p->base, p->worker_arg[w]);
  }
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->lock);
  vkrt_free(p->base, p);
}

uint32_t vkrt_reduce_pool_threads(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 4 ? 1 : (uint32_t)VKRT_MIN(cpus / 2, (long)VKRT_REDUCE_POOL_MAX);
}

void vkrt_reduce_pool_run(struct vkrt_reduce_pool *p, vkrt_type type, void *dst,
                          const void *const *src, uint32_t n, uint64_t count) {
  uint64_t bytes = count * (type == VKRT_TYPE_F32 ? 4 : 2);
  if (!p || bytes < POOL_MIN_BYTES) {
    vkrt_collective_reduce_cpu(type, dst, src, n, count);
    return;
  }
  pthread_mutex_lock(&p->lock);
  p->type = type;
  p->dst = dst;
  p->src = src;
  p->n = n;
  p->count = count;
  p->pending = p->threads - 1;
  p->generation++;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
  pool_part(p, 0);
  pthread_mutex_lock(&p->lock);
  while (p->pending)
    pthread_cond_wait(&p->done, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

/* ---- synchronization helpers --------------------------------------------------------- */

static vkrt_status status_of(VkResult r) {
  return r == VK_ERROR_DEVICE_LOST ? VKRT_ERROR_DEVICE_LOST
         : r == VK_TIMEOUT         ? VKRT_ERROR_TIMEOUT
                                   : VKRT_ERROR_VULKAN;
}

vkrt_status vkrt_collective_wait_value(struct vkrt_device *dev, VkSemaphore sem, uint64_t value,
                                       uint64_t deadline_ns) {
  /* A CPU device (lavapipe) executes on the cores a spin would take from it. */
  uint64_t now = vkrt_now_ns(), spin_end = now + (dev->caps.is_cpu ? 0 : WAIT_SPIN_NS);
  uint64_t current = 0;
  for (;;) {
    VkResult r = dev->vk.vkGetSemaphoreCounterValue(dev->handle, sem, &current);
    if (r != VK_SUCCESS)
      return status_of(r);
    if (current >= value)
      return VKRT_OK;
    now = vkrt_now_ns();
    if (now >= spin_end || now >= deadline_ns)
      break;
    cpu_relax();
  }
  VkSemaphoreWaitInfo info = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
      .semaphoreCount = 1,
      .pSemaphores = &sem,
      .pValues = &value,
  };
  for (;;) {
    now = vkrt_now_ns();
    if (now >= deadline_ns)
      return VKRT_ERROR_TIMEOUT;
    VkResult r = dev->vk.vkWaitSemaphores(dev->handle, &info, deadline_ns - now);
    if (r == VK_SUCCESS)
      return VKRT_OK;
    if (r != VK_TIMEOUT)
      return status_of(r);
  }
}

uint64_t vkrt_collective_progress(struct vkrt_appliance *app) {
  uint64_t sum = 0;
  for (uint32_t d = 0; d < app->device_count; d++) {
    struct vkrt_device *dev = &app->devices[d];
    uint64_t v = 0;
    if (dev->stream.timeline &&
        dev->vk.vkGetSemaphoreCounterValue(dev->handle, dev->stream.timeline, &v) == VK_SUCCESS)
      sum += v;
  }
  return sum;
}

#define PROGRESS_SLICE_NS 20000000ull /* re-check the appliance's progress every 20 ms */

vkrt_status vkrt_collective_wait_progress(struct vkrt_appliance *app, struct vkrt_device *dev,
                                          VkSemaphore sem, uint64_t value, uint64_t timeout_ns) {
  uint64_t progress = vkrt_collective_progress(app);
  uint64_t deadline = vkrt_now_ns() + timeout_ns;
  for (;;) {
    uint64_t now = vkrt_now_ns();
    vkrt_status s = vkrt_collective_wait_value(dev, sem, value,
                                               VKRT_MIN(deadline, now + PROGRESS_SLICE_NS));
    if (s != VKRT_ERROR_TIMEOUT)
      return s;
    /* Work still retiring somewhere (a deep pipeline recorded far ahead, a long kernel
     * before the collective) is not a stall: the clock restarts. */
    uint64_t current = vkrt_collective_progress(app);
    now = vkrt_now_ns();
    if (current != progress) {
      progress = current;
      deadline = now + timeout_ns;
    } else if (now >= deadline) {
      return VKRT_ERROR_TIMEOUT;
    }
  }
}

vkrt_status vkrt_collective_timeline_create(struct vkrt_device *dev, const void *pnext,
                                            VkSemaphore *out) {
  *out = VK_NULL_HANDLE;
  VkSemaphoreTypeCreateInfo type_info = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
      .pNext = pnext,
      .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
      .initialValue = 0,
  };
  VkSemaphoreCreateInfo info = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
                                .pNext = &type_info};
  VkResult r = dev->vk.vkCreateSemaphore(dev->handle, &info, NULL, out);
  if (r != VK_SUCCESS) {
    *out = VK_NULL_HANDLE;
    return vkrt_vk_error(dev, r, "vkCreateSemaphore (collective timeline)");
  }
  return VKRT_OK;
}

void vkrt_collective_semaphore_destroy(struct vkrt_device *dev, VkSemaphore sem) {
  if (sem)
    dev->vk.vkDestroySemaphore(dev->handle, sem, NULL);
}

VkResult vkrt_collective_host_signal(struct vkrt_device *dev, VkSemaphore sem, uint64_t value) {
  VkSemaphoreSignalInfo info = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
      .semaphore = sem,
      .value = value,
  };
  return dev->vk.vkSignalSemaphore(dev->handle, &info);
}

bool vkrt_collective_stalled(const struct vkrt_device *dev) {
  return vkrt_fault(dev, VKRT_FAULT_PEER_STALL);
}

vkrt_status vkrt_collective_record_copy(struct vkrt_device *dev, VkBuffer dst, uint64_t dst_offset,
                                        VkBuffer src, uint64_t src_offset, uint64_t size) {
  VkCommandBuffer cmd;
  vkrt_status s = vkrt_stream_cmd(dev, &cmd);
  if (s != VKRT_OK)
    return s;
  vkrt_stream_barrier(dev, cmd);
  VkBufferCopy region = {.srcOffset = src_offset, .dstOffset = dst_offset, .size = size};
  dev->vk.vkCmdCopyBuffer(cmd, src, dst, 1, &region);
  return VKRT_OK;
}

vkrt_status vkrt_collective_import_host(struct vkrt_device *dev, void *host, uint64_t size,
                                        VkBuffer *buffer, VkDeviceMemory *memory) {
  *buffer = VK_NULL_HANDLE;
  *memory = VK_NULL_HANDLE;
  if (vkrt_fault(dev, VKRT_FAULT_IMPORT_FAILS))
    return vkrt_error(&dev->app->base, VKRT_ERROR_UNAVAILABLE,
                      "dev%u: collective slot import failed: VK_ERROR_OUT_OF_DEVICE_MEMORY "
                      "(injected)", dev->index);
  VkResult r = vkrt_device_import_host_pointer(
      dev, host, size,
      VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
          VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, buffer, memory);
  if (r != VK_SUCCESS)
    return vkrt_error(&dev->app->base, VKRT_ERROR_UNAVAILABLE,
                      "dev%u: collective slot import failed: %s", dev->index,
                      vkrt_vk_result_str(r));
  return VKRT_OK;
}


/* ---- open / close / describe ------------------------------------------------------------ */

static const struct vkrt_transport_type *type_of(vkrt_transport_kind kind) {
  switch (kind) {
  case VKRT_TRANSPORT_NATIVE_FD: return VKRT_TRANSPORT_NATIVE_FD_TYPE;
  case VKRT_TRANSPORT_CPU_PROXY: return VKRT_TRANSPORT_CPU_PROXY_TYPE;
  case VKRT_TRANSPORT_HOST_STAGED: return VKRT_TRANSPORT_HOST_STAGED_TYPE;
  default: return NULL;
  }
}

vkrt_status vkrt_collective_open(struct vkrt_appliance *app) {
  struct vkrt_base *base = &app->base;
  app->collective = NULL;
  if (app->options.collective_transport >= VKRT_TRANSPORT_KIND_COUNT)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "options.collective_transport %u is not a vkrt_transport_kind",
                      app->options.collective_transport);
  struct vkrt_collective *coll = vkrt_calloc(base, 1, sizeof(*coll));
  struct vkrt_caps *caps = vkrt_calloc(base, app->device_count ? app->device_count : 1,
                                       sizeof(*caps));
  if (!coll || !caps) {
    vkrt_free(base, coll);
    vkrt_free(base, caps);
    return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "collectives: out of host memory");
  }
  coll->app = app;
  coll->slot_bytes = (uint64_t)CONFIG_VKRT_COLLECTIVE_SLOT_MB << 20;
  coll->timeout_ns = app->collective_timeout_ns ? app->collective_timeout_ns
                                                : (uint64_t)CONFIG_VKRT_COLLECTIVE_TIMEOUT_MS * 1000000ull;
  pthread_mutex_init(&coll->lock, NULL);
  for (uint32_t d = 0; d < app->device_count; d++)
    caps[d] = app->devices[d].caps;
  struct vkrt_transport_plan_input in = {
      .device_count = app->device_count,
      .caps = caps,
      .compiled = vkrt_transport_compiled(),
      .preference = IS_ENABLED(CONFIG_VKRT_TRANSPORT_PREFER_CPU_PROXY)
                        ? VKRT_TRANSPORT_PREFERENCE_CPU_PROXY
                        : VKRT_TRANSPORT_PREFERENCE_AUTO,
      .force = (vkrt_transport_kind)app->options.collective_transport,
      .host_sum = app->options.mpi,
  };
  vkrt_transport_plan(&in, &coll->plan);
  vkrt_free(base, caps);
  if (!coll->plan.ok) {
    vkrt_status s = vkrt_error(base, VKRT_ERROR_UNAVAILABLE, "%s", coll->plan.reason);
    pthread_mutex_destroy(&coll->lock);
    vkrt_free(base, coll);
    return s;
  }
  vkrt_log(base, VKRT_LOG_INFO, "collectives: %s", coll->plan.reason);
  if (coll->plan.kind != VKRT_TRANSPORT_NONE) {
    /* A transport whose creation finds the path unavailable (e.g. the host import fails at
     * runtime) hands over to the next usable candidate, unless one was forced. */
    vkrt_status s = VKRT_ERROR_UNAVAILABLE;
    for (int k = 0; k < 3; k++) {
      struct vkrt_transport_candidate *c = &coll->plan.candidates[k];
      if (!c->usable || c->kind < coll->plan.kind)
        continue;
      const struct vkrt_transport_type *type = type_of(c->kind);
      if (!type) {
        s = vkrt_error(base, VKRT_ERROR_INTERNAL, "collectives: %s planned but not linked",
                       vkrt_transport_str(c->kind));
        break;
      }
      s = type->create(coll, &coll->transport);
      if (s == VKRT_OK) {
        coll->type = type;
        if (c->kind != coll->plan.kind) {
          vkrt_log(base, VKRT_LOG_WARN, "collectives: %s; using %s", coll->fallback_note,
                   vkrt_transport_str(c->kind));
          coll->plan.kind = c->kind;
          size_t len = strlen(coll->plan.reason);
          vkrt_format(coll->plan.reason + len, sizeof(coll->plan.reason) - len,
                      "; but %s; using %s: %s", coll->fallback_note, vkrt_transport_str(c->kind),
                      c->reason);
        }
        break;
      }
      if (s != VKRT_ERROR_UNAVAILABLE || in.force != VKRT_TRANSPORT_NONE)
        break;
      vkrt_format(coll->fallback_note, sizeof(coll->fallback_note), "%s creation failed: %s",
                  vkrt_transport_str(c->kind), vkrt_base_last_error(base));
      c->usable = false;
    }
    if (s != VKRT_OK) {
      pthread_mutex_destroy(&coll->lock);
      vkrt_free(base, coll);
      return s;
    }
  }
  if (app->options.mpi) { /* the hosts' step, over the host transport's pieces */
    vkrt_status s = vkrt_interhost_create(app, coll->transport->piece_bytes, coll->timeout_ns,
                                          &coll->interhost);
    if (s != VKRT_OK) {
      coll->type->destroy(coll->transport);
      pthread_mutex_destroy(&coll->lock);
      vkrt_free(base, coll);
      return s;
    }
  }
  app->collective = coll;
  return VKRT_OK;
}

void vkrt_collective_close(struct vkrt_appliance *app) {
  struct vkrt_collective *coll = app->collective;
  if (!coll)
    return;
  if (coll->transport) /* joins the proxy thread, the interhost step's other caller */
    coll->type->destroy(coll->transport);
  vkrt_interhost_destroy(coll->interhost);
  pthread_mutex_destroy(&coll->lock);
  vkrt_free(&app->base, coll);
  app->collective = NULL;
}

vkrt_transport_kind vkrt_collective_kind(const struct vkrt_appliance *app) {
  return app->collective ? app->collective->plan.kind : VKRT_TRANSPORT_NONE;
}

size_t vkrt_collective_describe(const struct vkrt_appliance *app, bool json, char *buf,
                                size_t size) {
  const struct vkrt_collective *coll = app->collective;
  if (!coll)
    return (size_t)snprintf(buf, size, json ? "\"collectives\": null"
                                            : "vkrt: collectives: not open\n");
  size_t n = vkrt_transport_plan_describe(&coll->plan, json, buf, size);
  if (!json && coll->fallback_note[0]) {
    size_t left = n < size ? size - n : 0;
    n += (size_t)snprintf(left ? buf + n : NULL, left, "vkrt:   fallback: %s -> %s\n",
                          coll->fallback_note, vkrt_transport_str(coll->plan.kind));
  }
  if (coll->transport && coll->type->describe) {
    size_t left = n < size ? size - n : 0;
    n += coll->type->describe(coll->transport, json, left ? buf + n : NULL, left);
  }
  if (coll->interhost) {
    size_t left = n < size ? size - n : 0;
    n += vkrt_interhost_describe(coll->interhost, vkrt_transport_str(coll->plan.kind), json,
                                 left ? buf + n : NULL, left);
  }
  return n;
}

void vkrt_collective_hosts(const struct vkrt_appliance *app, uint32_t *rank, uint32_t *count) {
  vkrt_interhost_hosts(app->collective ? app->collective->interhost : NULL, rank, count);
}

vkrt_status vkrt_collective_status(struct vkrt_appliance *app) {
  struct vkrt_collective *coll = app->collective;
  if (!coll || !coll->transport || !coll->type->status)
    return VKRT_OK;
  char message[VKRT_ERROR_MESSAGE_SIZE];
  vkrt_status s = coll->type->status(coll->transport, message, sizeof(message));
  return s == VKRT_OK ? s : vkrt_error(&app->base, s, "%s", message);
}

/* ---- allreduce -------------------------------------------------------------------------- */

static vkrt_status check_buffer(struct vkrt_appliance *app, const char *what, uint32_t d,
                                const vkrt_buffer *b, uint64_t offset, uint64_t bytes) {
  uint64_t end;
  if (!b)
    return vkrt_error(&app->base, VKRT_ERROR_INVALID_ARGUMENT, "allreduce: %s[%u] is NULL", what,
                      d);
  if (b->dev->app != app || b->dev->index != d)
    return vkrt_error(&app->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "allreduce: %s[%u] is a buffer of dev%u; rank d must use a buffer of dev d",
                      what, d, b->dev->index);
  if (!vkrt_add_u64(offset, bytes, &end) || end > b->size)
    return vkrt_error(&app->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "allreduce: %s[%u] range [%llu, +%llu) is outside its buffer of %llu bytes",
                      what, d, (unsigned long long)offset, (unsigned long long)bytes,
                      (unsigned long long)b->size);
  return VKRT_OK;
}

vkrt_status vkrt_collective_allreduce(struct vkrt_appliance *app, const vkrt_allreduce_args *args) {
  struct vkrt_base *base = &app->base;
  struct vkrt_collective *coll = app->collective;
  if (!coll)
    return vkrt_error(base, VKRT_ERROR_INTERNAL, "allreduce: collectives are not open");
  if (!args)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "allreduce: args is NULL");
  if (args->type != VKRT_TYPE_F32 && args->type != VKRT_TYPE_F16)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "allreduce: type %d is not f32 or f16", (int)args->type);
  struct vkrt_allreduce_job job = {.args = args,
                                   .elem_size = args->type == VKRT_TYPE_F32 ? 4 : 2};
  if (!vkrt_mul_u64(args->count, job.elem_size, &job.bytes))
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "allreduce: count %llu overflows",
                      (unsigned long long)args->count);
  for (uint32_t d = 0; d < app->device_count; d++) {
    vkrt_status s = check_buffer(app, "send", d, args->send[d], args->send_offset[d], job.bytes);
    if (s == VKRT_OK)
      s = check_buffer(app, "recv", d, args->recv[d], args->recv_offset[d], job.bytes);
    if (s != VKRT_OK)
      return s;
    uint64_t so = args->send_offset[d], ro = args->recv_offset[d];
    if (so % job.elem_size || ro % job.elem_size)
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                        "allreduce: dev%u offsets (send %llu, recv %llu) must be multiples of the "
                        "element size %llu", d, (unsigned long long)so, (unsigned long long)ro,
                        (unsigned long long)job.elem_size);
    if (args->send[d] == args->recv[d] && so != ro && so < ro + job.bytes && ro < so + job.bytes)
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                        "allreduce: send[%u] and recv[%u] overlap without being the same range "
                        "(in place needs equal offsets)", d, d);
  }
  vkrt_status s = vkrt_collective_status(app);
  if (s != VKRT_OK || job.bytes == 0)
    return s;
  pthread_mutex_lock(&coll->lock);
  if (!coll->transport) { /* one device: the sum of one contribution is a copy */
    if (args->send[0] != args->recv[0] || args->send_offset[0] != args->recv_offset[0])
      s = vkrt_collective_record_copy(&app->devices[0], args->recv[0]->handle,
                                      args->recv_offset[0], args->send[0]->handle,
                                      args->send_offset[0], job.bytes);
  } else {
    s = coll->type->allreduce(coll->transport, &job);
  }
  pthread_mutex_unlock(&coll->lock);
  return s;
}
