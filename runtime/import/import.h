/* Host weights: registry of host regions (imported / pre-staged / staged per device) and
 * the per-device upload contexts with their staging rings. Internal to runtime/import,
 * plus a few entry points tests and vkrt-bench use. */
#pragma once
#include <pthread.h>
#include <stdatomic.h>

#include "base/workers.h"
#include "device/device.h"
#include "import/chunk_plan.h"
#include "import/region_table.h"

/* Kconfig values that only exist with pre-staging compiled in; the test override can
 * still pick a pre-stage policy in a build without it, then these defaults apply. */
#if IS_ENABLED(CONFIG_VKRT_PRESTAGE)
#define VKRT_PRESTAGE_BUDGET_BYTES ((uint64_t)CONFIG_VKRT_PRESTAGE_BUDGET_MB << 20)
#define VKRT_PRESTAGE_THREADS CONFIG_VKRT_PRESTAGE_THREADS
#else
#define VKRT_PRESTAGE_BUDGET_BYTES ((uint64_t)16384 << 20)
#define VKRT_PRESTAGE_THREADS 4
#endif
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
#define VKRT_IMPORT_CHUNK_CAP_BYTES ((uint64_t)CONFIG_VKRT_IMPORT_CHUNK_CAP_KB << 10)
#else
#define VKRT_IMPORT_CHUNK_CAP_BYTES 0ull
#endif

#define VKRT_UPLOAD_MAX_SLOTS 8

/* One device's view of a region: which path, and for imported / pre-staged paths the
 * chunk plan its buffers follow plus one VkBuffer + VkDeviceMemory per chunk. */
struct vkrt_region_device {
  vkrt_import_path path;
  const struct vkrt_chunk *chunks; /* region->chunks or region->prestage_chunks; NULL: staged */
  uint32_t chunk_count;
  uint64_t host_base;              /* host address of region offset 0 in that plan */
  VkBuffer *buffers;
  VkDeviceMemory *memories;
};

struct vkrt_region {
  const uint8_t *ptr;
  uint64_t size;
  atomic_uint users;     /* uploads DMAing from this region right now */
  bool published;        /* in the table (counted in regions_by_path) */
  struct vkrt_chunk *chunks;          /* plan over the caller's pages */
  uint32_t chunk_count;
  struct vkrt_chunk *prestage_chunks; /* plan over the pre-staged copy */
  uint32_t prestage_chunk_count;
  void *prestage_map;                 /* mmap of the anonymous copy (NULL: none) */
  size_t prestage_map_size;
  uint8_t *prestage_base;             /* aligned start of the copy inside the map */
  uint64_t prestage_bytes;            /* counted against the budget */
  struct vkrt_region_device dev[VKRT_MAX_DEVICES];
  char reason[VKRT_MAX_DEVICES][160];
};

/* The registry's worker pool for large memcpys: staging slots (an upload that finds the pool
 * busy copies alone rather than wait, so uploads never queue behind each other here) and
 * pre-staging (waits for the pool). Made at open; nothing allocates per copy. */
struct vkrt_copy_pool {
  struct vkrt_workers workers;
};

/* Starts `threads` helpers (0: none; copies are then single-threaded). */
void vkrt_copy_pool_init(struct vkrt_copy_pool *pool, uint32_t threads);
void vkrt_copy_pool_finish(struct vkrt_copy_pool *pool);
/* memcpy, spread over the helpers when it is large and the pool is free. */
void vkrt_copy_pool_memcpy(struct vkrt_copy_pool *pool, void *dst, const void *src, uint64_t size);
/* memcpy in 4 MiB blocks over the helpers and the caller (waiting for the pool), calling
 * progress (may be NULL) from the calling thread. Returns the threads used. */
uint32_t vkrt_copy_pool_copy(struct vkrt_copy_pool *pool, void *dst, const void *src,
                             uint64_t size, vkrt_progress_fn progress, void *progress_user);

/* Tuning of the pinned-chunk file loads (vkrt_lab_load's fields; 0: the default). */
struct vkrt_load_knobs {
  uint32_t threads, chunks;
  uint64_t chunk_bytes, block_bytes, gather_below;
  bool no_gather;
  bool pack_after_read; /* narrow rows packed once the whole chunk is read, not by each
                           reader right after its block */
  bool no_row_images;   /* narrow rows never moved by 2D copies into row images */
  uint32_t submit_batch; /* chunks per submission (0 or 1: each chunk as soon as it is read) */
};

struct vkrt_import_registry {
  struct vkrt_system *sys;        /* the devices it imports into */
  pthread_rwlock_t lock;          /* table: uploads read, register/unregister write */
  struct vkrt_region_table table;
  pthread_mutex_t drain_lock;     /* unregister waits here for users of a removed region */
  pthread_cond_t drain_cond;
  pthread_mutex_t budget_lock;
  uint64_t prestage_used;         /* bytes of pre-staged copies alive */
  uint64_t prestage_budget;       /* Kconfig budget capped by VK_EXT_memory_budget */
  uint32_t policy;                /* vkrt_import_policy in effect */
  uint64_t chunk_cap;             /* test cap (bytes; 0 = none) */
  uint64_t page_size;
  uint32_t prestage_threads;
  atomic_uint regions_by_path[VKRT_MAX_DEVICES][3]; /* describe: live regions per path */
  struct vkrt_copy_pool copy_pool;  /* staging-slot memcpys (VKRT_PRESTAGE_THREADS - 1 helpers) */
  atomic_long live_chunks;          /* imported VkBuffer + VkDeviceMemory pairs alive */
  /* vkrt_upload_counters, counted as uploads record their copies */
  atomic_uint_fast64_t path_bytes[3], path_copies[3]; /* by vkrt_import_path */
  atomic_uint_fast64_t straddles_split, copies_past_chunk;
  /* vkrt_load_file's pinned-chunk paths (stream.c) */
  struct vkrt_load_knobs load_knobs; /* 0 fields: defaults (vkrt_lab_load) */
  atomic_uint_fast64_t load_pinned;  /* bytes of pinned chunk memory of loads in progress */
};

/* One upload context: command buffers, a timeline semaphore and a staging ring. A thread
 * takes one from the device's free list for the length of one upload/download. */
struct vkrt_upload_context {
  struct vkrt_upload_context *next_free;
  VkCommandPool pool;
  VkCommandBuffer slot_cmd[VKRT_UPLOAD_MAX_SLOTS]; /* one per staging slot */
  VkCommandBuffer direct_cmd;                      /* copies straight from imported chunks */
  VkSemaphore timeline;
  uint64_t value;                                  /* last value submitted */
  uint64_t slot_value[VKRT_UPLOAD_MAX_SLOTS];      /* value that frees each slot */
  struct vkrt_buffer *staging;                     /* slots * slot_size, host-visible */
  uint8_t *staging_map;
};

struct vkrt_upload_state {
  struct vkrt_device *dev;
  struct vkrt_import_registry *registry; /* regions to DMA from, and the copy pool */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct vkrt_upload_context *free_list;
  struct vkrt_upload_context contexts[CONFIG_VKRT_UPLOAD_CONTEXTS];
  uint32_t context_count;  /* contexts fully created */
  uint64_t slot_size;
  uint32_t slots;
  VkQueue queue;
  pthread_mutex_t *queue_lock;
};

/* Registry (registry.c): opened after the devices, closed before them (after the upload
 * states that point at it). */
vkrt_status vkrt_registry_open(struct vkrt_system *sys, struct vkrt_import_registry **out);
void vkrt_registry_close(struct vkrt_import_registry *reg);
/* vkrt_host_register / vkrt_host_unregister / vkrt_import_policy_get on an open registry. */
vkrt_status vkrt_registry_register(struct vkrt_import_registry *reg, const void *ptr, uint64_t size,
                                   vkrt_progress_fn progress, void *progress_user,
                                   vkrt_register_info *info);
vkrt_status vkrt_registry_unregister(struct vkrt_import_registry *reg, const void *ptr);
vkrt_import_policy vkrt_registry_policy(const struct vkrt_import_registry *reg);
/* Upload contexts and staging rings per device (upload.c), DMAing from reg's regions. */
vkrt_status vkrt_upload_open(struct vkrt_system *sys, struct vkrt_import_registry *reg);
void vkrt_upload_close(struct vkrt_system *sys);
/* Import plan part of vkrt_describe: with json, JSON members ("import": ...) without braces
 * around them, like vkrt_collective_describe; else "vkrt: devN import via ...: why" lines.
 * Returns the length needed like snprintf. */
size_t vkrt_import_describe(const struct vkrt_system *sys, const struct vkrt_import_registry *reg,
                            bool json, char *buf, size_t size);
/* Finds the region holding all of [src, src + size) whose path on `device` is not staged,
 * and takes a reference (release with vkrt_region_release). NULL: use the staging ring. */
struct vkrt_region *vkrt_region_acquire(struct vkrt_import_registry *reg, uint32_t device,
                                        const void *src, uint64_t size);
void vkrt_region_release(struct vkrt_import_registry *reg, struct vkrt_region *region);

/* vkrt_copy_pool_copy on a pool of `threads` threads made for this copy (vkrt-bench
 * measures the pre-stage copy's scaling with it). Returns the threads actually used. */
uint32_t vkrt_import_parallel_copy(void *dst, const void *src, uint64_t size, uint32_t threads,
                                   vkrt_progress_fn progress, void *progress_user);

/* Bytes of pre-staged copies alive (tests: 0 after every region is unregistered). */
uint64_t vkrt_import_prestage_bytes(const struct vkrt_import_registry *reg);
/* Imported chunk buffers (VkBuffer + VkDeviceMemory) alive over all devices (tests: 0
 * after every region is unregistered). */
long vkrt_import_live_chunks(const struct vkrt_import_registry *reg);
/* Regions registered right now. */
uint32_t vkrt_import_region_count(const struct vkrt_import_registry *reg);
/* The upload path counters so far (all zero for a NULL registry). */
void vkrt_import_upload_counters(const struct vkrt_import_registry *reg,
                                 vkrt_upload_counters *out);
