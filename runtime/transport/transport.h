/* Collective transports: the pure planner's types and the transport vtable (Mesa vk_sync_type
 * style: a const struct of requirement/feature bits plus ops; optional ops may be NULL).
 *
 * The planner (plan.c) reads only capability snapshots and flags, so the unit test covers
 * every combination without a GPU and regardless of which transports this build compiled. */
#pragma once
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "device/device.h"
#include "transport/collective.h"
#include "vkrt/vkrt.h"

#define VKRT_TRANSPORT_KIND_COUNT 4 /* NONE, NATIVE_FD, CPU_PROXY, HOST_STAGED */
#define VKRT_TRANSPORT_BIT(kind) (1u << (kind))
#define VKRT_PLAN_REASON_SIZE 1024
#define VKRT_PLAN_PAIR_REASON_SIZE 192

/* What a transport needs from every device (the planner checks these) and what it offers. */
enum vkrt_transport_features {
  VKRT_TRANSPORT_NEEDS_HOST_IMPORT = 1u << 0,   /* VK_EXT_external_memory_host on every device */
  VKRT_TRANSPORT_NEEDS_SEMAPHORE_FD = 1u << 1,  /* get/import semaphore FD on every device */
  VKRT_TRANSPORT_NEEDS_TIMELINE = 1u << 2,      /* timeline semaphores on every device */
  VKRT_TRANSPORT_GPU_WAITS_GPU = 1u << 3,       /* queues wait on peers without a host hop */
  VKRT_TRANSPORT_ASYNC = 1u << 4,               /* allreduce returns before the data moved */
  VKRT_TRANSPORT_HOST_THREAD = 1u << 5,         /* runs a proxy thread */
};

/* Each kind's bits, stated once: the planner checks them, the vtables carry them. */
#define VKRT_TRANSPORT_NATIVE_FD_FEATURES                                                      \
  (VKRT_TRANSPORT_NEEDS_HOST_IMPORT | VKRT_TRANSPORT_NEEDS_SEMAPHORE_FD |                      \
   VKRT_TRANSPORT_NEEDS_TIMELINE | VKRT_TRANSPORT_GPU_WAITS_GPU | VKRT_TRANSPORT_ASYNC)
#define VKRT_TRANSPORT_CPU_PROXY_FEATURES                                                      \
  (VKRT_TRANSPORT_NEEDS_HOST_IMPORT | VKRT_TRANSPORT_NEEDS_TIMELINE | VKRT_TRANSPORT_ASYNC |   \
   VKRT_TRANSPORT_HOST_THREAD)
/* host-visible memory and submit + wait: every Vulkan device has them */
#define VKRT_TRANSPORT_HOST_STAGED_FEATURES 0u

enum vkrt_transport_preference {
  VKRT_TRANSPORT_PREFERENCE_AUTO = 0,   /* native_fd, cpu_proxy, host_staged: first usable */
  VKRT_TRANSPORT_PREFERENCE_CPU_PROXY,  /* never native_fd */
};

struct vkrt_transport_plan_input {
  uint32_t device_count;
  const struct vkrt_caps *caps;        /* device_count snapshots */
  uint32_t compiled;                   /* VKRT_TRANSPORT_BIT(kind) of each compiled transport */
  enum vkrt_transport_preference preference;
  vkrt_transport_kind force;           /* NONE: planner's choice; else only this one */
  bool host_sum;                       /* multi-host: the host's sum must land in host memory
                                        * (a transport even for one device; no native_fd) */
};

struct vkrt_transport_candidate {
  vkrt_transport_kind kind;
  bool usable;
  char reason[VKRT_PLAN_REASON_SIZE];  /* why usable, or why rejected */
};

struct vkrt_transport_plan {
  vkrt_transport_kind kind;            /* NONE: one device (no transport needed) or no usable one */
  bool ok;                             /* false: no usable transport; see reason */
  uint32_t semaphore_handle;           /* native_fd: VKRT_HANDLE_OPAQUE_FD or VKRT_HANDLE_SYNC_FD */
  char reason[4 * VKRT_PLAN_REASON_SIZE]; /* the choice (or the error listing every candidate) */
  struct vkrt_transport_candidate candidates[3]; /* native_fd, cpu_proxy, host_staged */
  uint32_t device_count;
  /* Per device pair (i != j): the semaphore handle type native_fd could use (0 = none) and
   * why. Symmetric. */
  uint32_t pair_handle[VKRT_MAX_DEVICES][VKRT_MAX_DEVICES];
  char pair_reason[VKRT_MAX_DEVICES][VKRT_MAX_DEVICES][VKRT_PLAN_PAIR_REASON_SIZE];
};

/* The VKRT_TRANSPORT_<KIND>_FEATURES of a kind (0 for NONE). */
uint32_t vkrt_transport_features_of(vkrt_transport_kind kind);
/* The planner. Pure: reads only `in`. Always fills `out`; out->ok says whether a transport
 * (or none, for one device) can be used. */
void vkrt_transport_plan(const struct vkrt_transport_plan_input *in,
                         struct vkrt_transport_plan *out);
/* Plan as "vkrt: ..." lines or JSON members. snprintf-like return. */
size_t vkrt_transport_plan_describe(const struct vkrt_transport_plan *plan, bool json, char *buf,
                                    size_t size);
/* VKRT_TRANSPORT_BIT of every transport compiled into this build. */
uint32_t vkrt_transport_compiled(void);

/* ---- runtime side (allreduce.c and the transports) -------------------------------------- */

struct vkrt_system;
struct vkrt_device;
struct vkrt_collective;
struct vkrt_transport;

/* One validated allreduce: byte ranges are checked, buffers are on their devices. */
struct vkrt_allreduce_job {
  const vkrt_allreduce_args *args;
  uint64_t elem_size;
  uint64_t bytes;
};

struct vkrt_transport_type {
  vkrt_transport_kind kind;
  const char *name;
  uint32_t features;
  vkrt_status (*create)(struct vkrt_collective *coll, struct vkrt_transport **out);
  void (*destroy)(struct vkrt_transport *transport);
  vkrt_status (*allreduce)(struct vkrt_transport *transport, const struct vkrt_allreduce_job *job);
  /* Optional: a sticky error found after an asynchronous allreduce returned (NULL: none). */
  vkrt_status (*status)(struct vkrt_transport *transport, char *message, size_t size);
  /* Optional: extra description lines. */
  size_t (*describe)(const struct vkrt_transport *transport, bool json, char *buf, size_t size);
  /* Optional (NULL: allreduce cannot be captured in a graph). While coll->capture is set,
   * allreduce records into the captures and lists its pieces there (vkrt_collective_
   * capture_piece) without issuing them. sequence: the piece counter. capture_end (the
   * streams still capturing): what the transport adds to the graph, then the counter set
   * back to cap->seq0, since nothing captured ran. replay: issue the captured pieces as the
   * next ones and return the shift of every captured semaphore value. */
  uint64_t (*sequence)(struct vkrt_transport *transport);
  vkrt_status (*capture_end)(struct vkrt_transport *transport, struct vkrt_collective_capture *cap);
  vkrt_status (*replay)(struct vkrt_transport *transport, const struct vkrt_collective_capture *cap,
                        uint64_t *shift);
};

/* Each vtable exists only when its transport is compiled in; the _TYPE macros are NULL
 * otherwise, so allreduce.c needs no #ifdef and never references a missing symbol. */
#if IS_ENABLED(CONFIG_VKRT_TRANSPORT_NATIVE_FD)
extern const struct vkrt_transport_type vkrt_transport_native_fd;
#define VKRT_TRANSPORT_NATIVE_FD_TYPE (&vkrt_transport_native_fd)
#else
#define VKRT_TRANSPORT_NATIVE_FD_TYPE NULL
#endif
#if IS_ENABLED(CONFIG_VKRT_TRANSPORT_CPU_PROXY)
extern const struct vkrt_transport_type vkrt_transport_cpu_proxy;
#define VKRT_TRANSPORT_CPU_PROXY_TYPE (&vkrt_transport_cpu_proxy)
#else
#define VKRT_TRANSPORT_CPU_PROXY_TYPE NULL
#endif
#if IS_ENABLED(CONFIG_VKRT_TRANSPORT_HOST_STAGED)
extern const struct vkrt_transport_type vkrt_transport_host_staged;
#define VKRT_TRANSPORT_HOST_STAGED_TYPE (&vkrt_transport_host_staged)
#else
#define VKRT_TRANSPORT_HOST_STAGED_TYPE NULL
#endif

/* Every transport instance starts with this. */
struct vkrt_transport {
  const struct vkrt_transport_type *type;
  struct vkrt_collective *coll;
  uint64_t piece_bytes; /* host transports: an allreduce is cut into pieces of this size */
};

/* ---- the inter-host step (transport/mpi.c, CONFIG_VKRT_TRANSPORT_MPI) ---------------------
 * The host transports (cpu_proxy, host_staged) end each piece with the host's contributions
 * in host memory; with several hosts they call vkrt_interhost_allreduce instead of their CPU
 * reduce, which sums the host's devices, exchanges the host sums and writes the global sum
 * into their result buffer. */
struct vkrt_interhost;
#if IS_ENABLED(CONFIG_VKRT_TRANSPORT_MPI)
/* Joins the hosts of sys->options.mpi_comm (collective over it, bounded by timeout_ns) and
 * checks that every host has the same device count and piece size. */
vkrt_status vkrt_interhost_create(struct vkrt_system *sys, uint64_t piece_bytes,
                                  uint64_t timeout_ns, struct vkrt_interhost **out);
void vkrt_interhost_destroy(struct vkrt_interhost *ih);
/* dst (type) = the sum over every host, in host order, of each host's sum of its n device
 * contributions src[0..n) (device order), accumulated in f32. dst may alias any src. Blocks
 * until every host delivered, bounded by the timeout (restarted by progress). On failure the
 * status is sticky, message names the host, and the caller must signal what waits on it. */
vkrt_status vkrt_interhost_allreduce(struct vkrt_interhost *ih, vkrt_type type, void *dst,
                                     const void *const *src, uint32_t n, uint64_t count,
                                     char *message, size_t size);
void vkrt_interhost_hosts(const struct vkrt_interhost *ih, uint32_t *rank, uint32_t *count);
size_t vkrt_interhost_describe(const struct vkrt_interhost *ih, const char *intra, bool json,
                               char *buf, size_t size);
#else
static inline vkrt_status vkrt_interhost_create(struct vkrt_system *sys, uint64_t piece_bytes,
                                                uint64_t timeout_ns, struct vkrt_interhost **out) {
  (void)piece_bytes;
  (void)timeout_ns;
  *out = NULL;
  return vkrt_error(&sys->base, VKRT_ERROR_UNSUPPORTED,
                    "options name an MPI communicator but this build has no multi-host "
                    "transport (CONFIG_VKRT_TRANSPORT_MPI=n)");
}
static inline void vkrt_interhost_destroy(struct vkrt_interhost *ih) { (void)ih; }
static inline vkrt_status vkrt_interhost_allreduce(struct vkrt_interhost *ih, vkrt_type type,
                                                   void *dst, const void *const *src,
                                                   uint32_t n, uint64_t count, char *message,
                                                   size_t size) {
  (void)ih, (void)type, (void)dst, (void)src, (void)n, (void)count;
  snprintf(message, size, "no multi-host transport in this build");
  return VKRT_ERROR_UNSUPPORTED;
}
static inline void vkrt_interhost_hosts(const struct vkrt_interhost *ih, uint32_t *rank,
                                        uint32_t *count) {
  (void)ih;
  *rank = 0;
  *count = 1;
}
static inline size_t vkrt_interhost_describe(const struct vkrt_interhost *ih, const char *intra,
                                             bool json, char *buf, size_t size) {
  (void)ih, (void)intra, (void)json, (void)buf, (void)size;
  return 0;
}
#endif

struct vkrt_collective {
  struct vkrt_system *sys;
  struct vkrt_transport_plan plan;
  const struct vkrt_transport_type *type;
  struct vkrt_transport *transport;
  struct vkrt_interhost *interhost; /* multi-host appliances only */
  uint64_t slot_bytes;    /* per device slot (CONFIG_VKRT_COLLECTIVE_SLOT_MB) */
  uint64_t timeout_ns;
  char fallback_note[VKRT_PLAN_REASON_SIZE]; /* set when create failed and a later one was used */
  pthread_mutex_t lock;   /* one allreduce at a time: it records into every device's stream */
  struct vkrt_collective_capture *capture; /* non-NULL while a graph captures */
};

/* Capture: lists one piece; an error with a message when the graph has no room. */
vkrt_status vkrt_collective_capture_piece(struct vkrt_collective *coll, uint64_t count,
                                          vkrt_type type);

/* Sum of n inputs in rank order 0..n-1, accumulated in f32 (f16 inputs converted to f32, the
 * sum converted back with round-to-nearest-even). dst may alias src[0]. The same order on
 * every rank is what makes results bit-identical. */
void vkrt_collective_reduce_cpu(vkrt_type type, void *dst, const void *const *src, uint32_t n,
                                uint64_t count);

/* The same sum split across `threads` threads (the caller is one) for pieces of 1 MiB and
 * more; bit-identical to vkrt_collective_reduce_cpu. threads < 2 makes no pool (*out NULL,
 * and vkrt_reduce_pool_run(NULL, ...) sums on the calling thread). */
#define VKRT_REDUCE_POOL_MAX 8
struct vkrt_reduce_pool;
vkrt_status vkrt_reduce_pool_create(struct vkrt_base *base, uint32_t threads,
                                    struct vkrt_reduce_pool **out);
void vkrt_reduce_pool_destroy(struct vkrt_reduce_pool *pool);
void vkrt_reduce_pool_run(struct vkrt_reduce_pool *pool, vkrt_type type, void *dst,
                          const void *const *src, uint32_t n, uint64_t count);
/* Threads worth using for the CPU reduce here: half the online CPUs (the driver and the
 * proxy need the rest), at most VKRT_REDUCE_POOL_MAX. */
uint32_t vkrt_reduce_pool_threads(void);

/* Waits until the timeline `sem` of dev reaches value: a short bounded spin on the counter,
 * then vkWaitSemaphores until deadline_ns (vkrt_now_ns clock); never a fence, never an
 * unbounded spin. Returns VKRT_ERROR_TIMEOUT / VKRT_ERROR_DEVICE_LOST / VKRT_ERROR_VULKAN
 * without setting a message (the caller knows what was awaited). */
vkrt_status vkrt_collective_wait_value(struct vkrt_device *dev, VkSemaphore sem, uint64_t value,
                                       uint64_t deadline_ns);
/* Sum of every device's stream timeline: grows while any device retires work. */
uint64_t vkrt_collective_progress(struct vkrt_system *sys);
/* vkrt_collective_wait_value until no device of the appliance has retired any work for
 * timeout_ns: a collective times out on a stall, not because the host recorded far ahead of
 * the devices. */
vkrt_status vkrt_collective_wait_progress(struct vkrt_system *sys, struct vkrt_device *dev,
                                          VkSemaphore sem, uint64_t value, uint64_t timeout_ns);
/* What a collective timeline is called in vkrt_timeline_create's error message. */
#define COLLECTIVE_TIMELINE "vkCreateSemaphore (collective timeline)"

/* Signals a timeline semaphore from the host (values must grow). */
VkResult vkrt_collective_host_signal(struct vkrt_device *dev, VkSemaphore sem, uint64_t value);
/* True when injected VKRT_FAULT_PEER_STALL applies to dev: its contribution never signals. */
bool vkrt_collective_stalled(const struct vkrt_device *dev);
/* Records [barrier, copy src -> dst] into dev's stream (the stream's convention: every
 * command starts with a barrier; the submit ends with one towards the host). */
vkrt_status vkrt_collective_record_copy(struct vkrt_device *dev, VkBuffer dst, uint64_t dst_offset,
                                        VkBuffer src, uint64_t src_offset, uint64_t size);
/* The same copy to run right after the waits attached to the next submit, before anything
 * recorded later: the stream's tail (recorded by the device's submitter thread) when it can
 * take one, else recorded here. `host`: dst is memory the host reads. */
vkrt_status vkrt_collective_copy_after_waits(struct vkrt_device *dev, VkBuffer dst,
                                             uint64_t dst_offset, VkBuffer src,
                                             uint64_t src_offset, uint64_t size, bool host);
/* Imports [host, host + size) (page-aligned, size a multiple of the import alignment) into
 * dev as one buffer usable for transfers and storage. VKRT_ERROR_UNAVAILABLE (message set)
 * when the import fails, so the caller can fall back. On failure the caller destroys what
 * is non-NULL in *buffer / *memory. */
vkrt_status vkrt_collective_import_host(struct vkrt_device *dev, void *host, uint64_t size,
                                        VkBuffer *buffer, VkDeviceMemory *memory);
