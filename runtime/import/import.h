/* Host weights: registry of host regions (imported / pre-staged / staged per device) and
 * the per-device upload contexts with their staging rings. Internal to runtime/import,
 * plus a few entry points tests and vkrt-bench use. */
#pragma once
#include <pthread.h>
#include <stdatomic.h>

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

/* Helper threads for large memcpys on the upload path (staging slots). Made at open; an
 * upload that finds the pool busy copies alone rather than wait, so uploads never queue
 * behind each other here and nothing allocates. */
struct vkrt_copy_pool {
  pthread_mutex_t owner;         /* trylock: one upload drives the helpers at a time */
  pthread_mutex_t lock;
  pthread_cond_t work_cond, done_cond;
  uint32_t threads;              /* helper threads started */
  pthread_t tid[64];
  uint64_t generation;           /* bumped per job */
  uint32_t pending;              /* helpers still working on the current job */
  bool quit;
  uint8_t *dst;
  const uint8_t *src;
  uint64_t size, block;
  atomic_uint_fast64_t next_block;
};

/* Starts `threads` helpers (0: none; copies are then single-threaded). */
void vkrt_copy_pool_init(struct vkrt_copy_pool *pool, uint32_t threads);
void vkrt_copy_pool_finish(struct vkrt_copy_pool *pool);
/* memcpy, spread over the helpers when it is large and the pool is free. */
void vkrt_copy_pool_memcpy(struct vkrt_copy_pool *pool, void *dst, const void *src, uint64_t size);

struct vkrt_import_registry {
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

/* Registry (registry.c). */
vkrt_status vkrt_registry_open(struct vkrt_appliance *app);
void vkrt_registry_close(struct vkrt_appliance *app);
/* Finds the region holding all of [src, src + size) whose path on `device` is not staged,
 * and takes a reference (release with vkrt_region_release). NULL: use the staging ring. */
struct vkrt_region *vkrt_region_acquire(struct vkrt_appliance *app, uint32_t device,
                                        const void *src, uint64_t size);
void vkrt_region_release(struct vkrt_appliance *app, struct vkrt_region *region);

/* Copies size bytes with up to `threads` threads (blocks handed out dynamically), calling
 * progress (may be NULL) from the calling thread. Returns the threads actually used. Used
 * for pre-staging and by vkrt-bench. */
uint32_t vkrt_import_parallel_copy(void *dst, const void *src, uint64_t size, uint32_t threads,
                                   vkrt_progress_fn progress, void *progress_user);

/* Bytes of pre-staged copies alive (tests: 0 after every region is unregistered). */
uint64_t vkrt_import_prestage_bytes(const struct vkrt_appliance *app);
/* Imported chunk buffers (VkBuffer + VkDeviceMemory) alive over all devices (tests: 0
 * after every region is unregistered). */
long vkrt_import_live_chunks(const struct vkrt_appliance *app);
/* Regions registered right now. */
uint32_t vkrt_import_region_count(const struct vkrt_appliance *app);
