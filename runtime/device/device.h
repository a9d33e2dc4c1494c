/* Internal appliance, device, buffer and stream objects shared by every runtime module. */
#pragma once
#include <pthread.h>
#include <stdatomic.h>

#include "base/base.h"
#include "device/caps.h"
#include "vk/vk_table.h"

#define VKRT_STREAM_DEPTH 16      /* command buffers in flight per device stream */
#define VKRT_STREAM_MAX_SYNC 16   /* extra waits/signals attached to one submit */
#define VKRT_STREAM_MAX_ACCESS 32 /* buffer ranges tracked between two barriers */
/* GPUs: a wait spins this long on the timeline before it blocks in the driver, unless
 * vkrt_options.wait_spin_us says otherwise. A blocked wait came back ~90 us after the work on
 * an H100 (driver 580.159): Llama-3-8B q4_K tokens of ~3 ms ran p50 2.98-3.03 ms, p99 3.2-3.3
 * ms with a 2 ms spin, 2.913 / 2.93 ms with 20 ms (tg 329 -> 343 tok/s; vkrt-service asks for
 * 20 ms); vkrt-bench cases' wall clock per op 1.03-1.10 x -> 1.01-1.02 x its GPU time. But
 * the GPU suite's ~40 programs on 16 CPUs ran 25-30 % longer with every wait spinning 20 ms
 * (two past their limit): the library's default stays 2 ms. */
#define VKRT_STREAM_SPIN_NS 2000000ull
#define VKRT_WAIT_SPIN_US_MAX 10000000u
/* The submitter thread, out of work on a GPU, spins for the next batch for twice the time
 * the recent batches took to come, within these bounds, then polls every DOZE_NS in a sleep
 * until SPIN_NS has passed, then sleeps until a caller wakes it. A batch caught dozing
 * waits a poll at most: spinning longer than two polls buys less than it burns. */
#define VKRT_STREAM_HOT_MIN_NS 10000ull
#define VKRT_STREAM_DOZE_NS 50000ull
#define VKRT_STREAM_HOT_MAX_NS (2 * VKRT_STREAM_DOZE_NS)
enum { VKRT_STREAM_PREP_NONE, VKRT_STREAM_PREP_ASKED, VKRT_STREAM_PREP_WORKING,
       VKRT_STREAM_PREP_BEGUN, VKRT_STREAM_PREP_FAILED };
/* Overlap: the stream submits what it recorded while the host keeps recording (as
 * ggml-vulkan does within a graph): the first piece after an explicit submit after this many
 * commands, each later piece twice as many up to flush_ops, and any piece once its commands
 * touched this many bytes (~250 us of H200 bandwidth: a piece boundary cost a large
 * matrix-vector ~10 us of GPU time on the H200, so 64 MiB, one piece per such op, made the
 * 117 MB f16 K 14336 x N 4096 case 40.5 us instead of 30.4). */
#define VKRT_STREAM_FLUSH_FIRST 4
#define VKRT_STREAM_FLUSH_OPS 64
#define VKRT_STREAM_FLUSH_BYTES (1024ull << 20)

struct vkrt_buffer;

/* A byte range [lo, hi) of a buffer that a recorded command reads or writes. */
struct vkrt_stream_access {
  const struct vkrt_buffer *buffer;
  uint64_t lo, hi;
  bool write;
};

/* Commands a transport attaches to the next deferred submit, to run right after its waits
 * and before anything recorded since (a collective's reduce or copy-out): the submitter
 * thread records them into a command buffer of its own, so the caller's thread does not
 * pay for their recording. `record` calls Vulkan through `vk` and uses only `data` (the
 * caller resolves pipelines into it), no device or stream state. */
#define VKRT_STREAM_TAIL_BYTES 320
struct vkrt_stream_tail {
  void (*record)(const struct vkrt_device_table *vk, VkCommandBuffer cmd, const void *data);
  bool host; /* the commands may write memory the host reads: closed by the host barrier */
  _Alignas(8) unsigned char data[VKRT_STREAM_TAIL_BYTES];
};

/* One vkQueueSubmit batch of the stream: its command buffer (NULL: an empty submit) and what
 * it waits for and signals (the stream timeline first). */
struct vkrt_stream_batch {
  VkCommandBuffer cmd;
  bool has_tail;            /* `tail` runs first, from tail_cmd (the submitter records it) */
  VkCommandBuffer tail_cmd;
  struct vkrt_stream_tail tail;
  bool end; /* cmd is still open: the submitter thread ends it (a deferred stream submit) */
  /* 1 + a ring slot the submitter thread begins for the caller before it submits (0: none),
   * once the timeline reached begin_retire (the slot's last use) */
  uint32_t begin_slot;
  uint64_t begin_retire;
  uint32_t wait_count, signal_count;
  VkSemaphore wait_sem[VKRT_STREAM_MAX_SYNC];
  uint64_t wait_value[VKRT_STREAM_MAX_SYNC];
  VkSemaphore signal_sem[VKRT_STREAM_MAX_SYNC + 1];
  uint64_t signal_value[VKRT_STREAM_MAX_SYNC + 1];
};

/* A device's op stream: a ring of command buffers and one timeline semaphore whose value
 * counts submits. Record from one thread at a time per device. */
struct vkrt_stream {
  /* one pool per command buffer: vkResetCommandPool before reuse is cheaper than the
   * implicit per-buffer reset of vkBeginCommandBuffer on NVIDIA */
  VkCommandPool pool[VKRT_STREAM_DEPTH];
  VkCommandBuffer cmd[VKRT_STREAM_DEPTH];
  uint64_t cmd_value[VKRT_STREAM_DEPTH]; /* timeline value that retires cmd[i]; 0 = free */
  uint32_t current;
  bool recording;
  bool used;   /* the recording buffer was handed out (a buffer begun ahead by the last submit
                * and not yet used is not submitted) */
  bool fresh;  /* the recording buffer holds no command yet: the barrier before its first
                * command is the one every submitted buffer ends with (vkrt_stream_submit) */
  /* The compute pipeline the ops last bound into `bound_cmd` (reset when a buffer begins):
   * an op of the same kernel skips vkCmdBindPipeline (q/k/v, gate/up: one bind) */
  VkCommandBuffer bound_cmd;
  VkPipeline bound_pipeline;
  bool host_reads; /* a command of the recording buffer may write memory the host reads
                    * (a mapped buffer, an imported host slot, or a raw caller): its closing
                    * barrier reaches the host stage */
  uint64_t host_closes; /* submitted buffers closed with the host barrier (vkrt_lab) */
  uint64_t begun_ahead; /* buffers a submit began for the next op (vkrt_lab) */
  /* Slots the submitter thread begins for the caller (deferred submits): a deferred submit
   * of slot s asks for slot s + 2, so that the submit of s + 1 finds its next buffer begun
   * and the caller's thread pays no pool reset and begin (H200: 2.5 us per device inside
   * vkrt_allreduce). VKRT_STREAM_PREP_*: the caller asks and takes; the submitter claims,
   * begins and says how it went; a caller that finds a slot still asked withdraws the ask
   * and begins it itself. */
  atomic_int prep[VKRT_STREAM_DEPTH];
  uint64_t prepared; /* buffers the caller took begun by the submitter (vkrt_lab) */
  /* The device's function table as it was at init: the submitter thread calls through it,
   * never through entries the lab's profile swaps on the recording thread */
  struct vkrt_device_table submitter_vk;
  /* What the commands recorded since the last barrier touch (vkrt_stream_next): a command
   * that touches none of it the way a hazard needs runs without a barrier before it. */
  uint32_t unsynced;
  bool unsynced_unknown; /* a raw caller recorded since the last barrier */
  /* The pipeline stages of those commands (compute for dispatches, transfer for copies and
   * fills): the first scope of the next barrier, so a barrier between dispatches waits for
   * dispatches only. full_barrier_stages (the lab's) names compute and transfer always. */
  VkPipelineStageFlags unsynced_stages;
  bool full_barrier_stages;
  struct vkrt_stream_access unsynced_access[VKRT_STREAM_MAX_ACCESS];
  uint64_t barriers, barriers_elided; /* tracked commands with and without one (vkrt_lab) */
  uint64_t barriers_compute; /* barriers whose first scope was the compute stage alone */
  /* Overlap (vkrt_stream_next): commands and bytes recorded since the last submit, the
   * command count that flushes the next piece, and its cap (0: never flush). */
  uint32_t pending_ops, flush_at, flush_ops;
  uint32_t wait_ops; /* pending_ops when the first attached wait was added */
  uint64_t pending_bytes;
  uint64_t flushes; /* pieces submitted by the stream itself (vkrt_lab) */
  VkSemaphore timeline;
  uint64_t submitted;                    /* last value submitted */
  /* waits and the submitter spin this long before blocking (0 on CPU devices); atomic: a
   * test changes it while the submitter thread reads it (vkrt_stream_set_spin_ns) */
  _Atomic uint64_t spin_ns;
  /* attached to the next submit (collectives use these) */
  uint32_t wait_count, signal_count;
  VkSemaphore wait_sem[VKRT_STREAM_MAX_SYNC];
  uint64_t wait_value[VKRT_STREAM_MAX_SYNC];
  VkSemaphore signal_sem[VKRT_STREAM_MAX_SYNC];
  uint64_t signal_value[VKRT_STREAM_MAX_SYNC];
  /* Deferred submission (vkrt_stream_defer_waits): a submit with waits or signals attached
   * (a collective's) goes to the device's submitter thread, and so does every later one
   * while any is queued, so neither vkQueueSubmit's own wait for a peer's semaphore nor the
   * submit itself runs on the caller's thread. The ring holds [defer_head, defer_tail): the
   * caller publishes a batch with one store and takes defer_lock only to wake a submitter
   * that sleeps (after spinning spin_ns for more work) or to wait for room. */
  bool defer_waits, submitter_started;
  atomic_bool submitter_stop;
  atomic_bool submitter_sleeping; /* in pthread_cond_wait on defer_wake (or about to be) */
  uint64_t submitter_gap_ns;      /* submitter: moving mean of the idle time before a batch */
  /* the submitter's catches: batches found while spinning, while dozing, and after a
   * caller woke it (vkrt_lab) */
  atomic_uint_fast64_t caught_spinning, caught_dozing, woken;
  pthread_t submitter;
  pthread_mutex_t defer_lock;
  pthread_cond_t defer_wake, defer_space;
  atomic_uint_fast64_t defer_tail; /* caller: batches queued */
  atomic_uint_fast64_t defer_head; /* submitter: batches submitted (or failed) */
  uint64_t deferred;              /* batches that went through the submitter (vkrt_lab) */
  atomic_int deferred_error;      /* first failed deferred submit (vkrt_status), sticky */
  char deferred_message[160];
  struct vkrt_stream_batch defer_ring[VKRT_STREAM_DEPTH];
  /* Tails (vkrt_stream_add_tail): the one attached to the next submit, and the submitter's
   * command buffers for them, one pool each, taken in turn (tail_next, the submitter's);
   * tail_retire[i] is the timeline value whose completion frees tail_cmd[i]. Made with the
   * submitter. */
  bool tail_pending;
  struct vkrt_stream_tail tail;
  VkCommandPool tail_pool[VKRT_STREAM_DEPTH];
  VkCommandBuffer tail_cmd[VKRT_STREAM_DEPTH];
  uint64_t tail_retire[VKRT_STREAM_DEPTH];
  uint64_t tail_next;
  atomic_uint_fast64_t tails; /* tails the submitter recorded (vkrt_lab) */
  struct vkrt_stream_capture *capture; /* non-NULL while a graph captures this device */
};

/* Graph capture on one device (vkrt_stream_capture_begin .. _end): while a stream has one,
 * what it records goes into reusable command buffers of `pool`, each submit closes a batch
 * (its command buffer and the waits and signals attached) instead of submitting, and the
 * buffers the commands touch are listed for the launch's liveness check. The owner sizes
 * the arrays; running out fails the recording call with a message. */
struct vkrt_stream_capture {
  VkCommandPool pool;
  struct vkrt_stream_batch *batch;
  uint32_t batch_count, batch_cap;
  const struct vkrt_buffer **buffers;
  uint64_t *buffer_ids;
  uint32_t buffer_count, buffer_cap;
  bool open;       /* batch[batch_count].cmd is being recorded */
  bool overflow;   /* a buffer did not fit in the list: the graph must not be launched */
};

struct vkrt_system;
struct vkrt_ops_state;      /* runtime/ops */
struct vkrt_upload_state;   /* runtime/import */

struct vkrt_device {
  struct vkrt_system *sys;
  uint32_t index;
  VkPhysicalDevice physical;
  VkDevice handle;
  struct vkrt_device_table vk;
  struct vkrt_caps caps;
  uint32_t compute_family, transfer_family;
  uint32_t queue_families[2];              /* {compute, transfer} for CONCURRENT buffers */
  VkQueue compute_queue, transfer_queue;  /* transfer_queue == compute_queue when none */
  pthread_mutex_t compute_queue_lock;     /* vkQueueSubmit is externally synchronized */
  pthread_mutex_t transfer_queue_lock;    /* same mutex object semantics when shared */
  pthread_mutex_t *transfer_lock;         /* points at the lock guarding transfer_queue */
  uint32_t memory_type_device_local;      /* UINT32_MAX when absent */
  uint32_t memory_type_host_visible;      /* HOST_VISIBLE|HOST_COHERENT, prefer cached */
  struct vkrt_stream stream;
  struct vkrt_ops_state *ops;             /* pipelines; NULL until first op */
  struct vkrt_upload_state *upload;       /* upload contexts and staging rings */
  uint32_t fault_mask;                    /* injected faults that apply to this device */
  bool lost;
  /* Called once as the device closes, by a layer above that holds a pointer to it beyond a
   * call (the lab's Vulkan-call profiler); NULL when none. */
  void (*on_close)(struct vkrt_device *dev);
  /* Buffers destroyed while recorded or submitted work may still use them (under
   * sys->buffers_lock): freed once the stream passes their last use, or at close. */
  struct vkrt_buffer *zombies;
};

struct vkrt_buffer {
  struct vkrt_device *dev;
  uint64_t id;                        /* unique in the system, never reused */
  struct vkrt_buffer *live_prev, *live_next; /* the system's live buffers */
  VkBuffer handle;
  VkDeviceMemory memory;             /* the buffer's own, bound at offset 0 */
  uint32_t memory_type;              /* its memory type index */
  uint64_t memory_size;              /* its allocation size (the driver's, >= size) */
  uint64_t size;
  uint32_t flags;
  void *mapped;
  /* The stream value whose completion retires the last recorded use (0: none): a buffer
   * destroyed before then waits on dev->zombies until the GPU is done with it. */
  _Atomic uint64_t last_use;
  struct vkrt_buffer *zombie_next;
};

/* What runtime/device brings up: the loader, the instance (with validation) and one
 * VkDevice per rank with its tables, capabilities, queues and stream. The wings
 * (import, transport, ops) get it, or just a device, as a parameter; the appliance
 * (runtime/appliance) embeds it beside the wings' states. */
struct vkrt_system {
  struct vkrt_base base;
  vkrt_options options;
  struct vkrt_board board;
  void *loader_handle;
  struct vkrt_global_table vkg;
  struct vkrt_instance_table vki;
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  atomic_uint validation_messages;
  VkAllocationCallbacks vk_allocator;     /* routes driver allocations to base.allocator */
  atomic_uint vk_alloc_count;             /* fault injection: vkAllocateMemory calls */
  uint32_t device_count;
  struct vkrt_device devices[VKRT_MAX_DEVICES];
  atomic_long vk_driver_live;             /* driver allocations via vk_allocator not yet freed */
  uint32_t api_version;                   /* instance apiVersion requested */
  /* Live buffers, for the liveness check of captured graphs: ids grow, a destroy counts. */
  pthread_mutex_t buffers_lock;
  struct vkrt_buffer *live_buffers;
  uint64_t buffer_ids;                    /* under buffers_lock */
  atomic_uint_fast64_t buffers_destroyed;
  uint32_t physical_count;                /* physical devices enumerated */
};

/* Faults: true when `bit` is injected on this device (always false without
 * CONFIG_VKRT_FAULT_INJECTION). */
static inline bool vkrt_fault(const struct vkrt_device *dev, uint32_t bit) {
  return IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION) && (dev->fault_mask & bit);
}

/* Converts a failed VkResult into a status with "devN: what: VK_ERROR_..." as message. */
vkrt_status vkrt_vk_error(struct vkrt_device *dev, VkResult result, const char *what);

/* vkAllocateMemory through the appliance allocator and the fault-injection counter. */
VkResult vkrt_device_allocate_memory(struct vkrt_device *dev, const VkMemoryAllocateInfo *info,
                                     VkDeviceMemory *out);
/* First memory type in type_bits having all of `required` (preferring `preferred` too);
 * UINT32_MAX when none. */
uint32_t vkrt_device_memory_type(const struct vkrt_device *dev, uint32_t type_bits,
                                 uint32_t required, uint32_t preferred);

/* A timeline semaphore with initial value 0 (pnext chained after the type info when given);
 * `what` names it in the error message. Destroy with vkrt_timeline_destroy (NULL: no-op). */
vkrt_status vkrt_timeline_create(struct vkrt_device *dev, const void *pnext, const char *what,
                                 VkSemaphore *out);
void vkrt_timeline_destroy(struct vkrt_device *dev, VkSemaphore sem);

/* Stream: returns the command buffer being recorded, beginning a fresh one when needed
 * (waiting for the oldest to retire if all are in flight). The caller may record anything,
 * so the buffer will close with the host barrier; a caller whose commands touch memory
 * orders them after earlier ones with vkrt_stream_barrier, and the next command of
 * vkrt_stream_next then gets a barrier too. (The timer records timestamps only, without.) */
vkrt_status vkrt_stream_cmd(struct vkrt_device *dev, VkCommandBuffer *out);
/* The buffer being recorded for a command that touches exactly the `count` ranges of
 * `access`, with a barrier before it only when it reads what a command since the last
 * barrier wrote, or writes what one read or wrote (read after read needs none). NULL or
 * count 0: raw Vulkan on memory libvkrt cannot name (maybe host slots): a barrier before
 * it, one before the next command, and the host barrier when the buffer closes, which
 * otherwise comes only if some command wrote a mapped buffer. */
vkrt_status vkrt_stream_next(struct vkrt_device *dev, const struct vkrt_stream_access *access,
                             uint32_t count, VkCommandBuffer *out);
/* vkrt_stream_next for a copy of `size` bytes: src's range read, dst's written. */
vkrt_status vkrt_stream_next_copy(struct vkrt_device *dev, const struct vkrt_buffer *dst,
                                  uint64_t dst_offset, const struct vkrt_buffer *src,
                                  uint64_t src_offset, uint64_t size, VkCommandBuffer *out);
/* A memory barrier between commands in the stream: it waits for the stages the commands
 * since the last barrier used (compute, transfer or both; both after a raw caller) and
 * makes their writes visible to compute and transfer reads and writes after it; none
 * before the first command of a buffer (vkrt_stream_close_barrier ordered it). */
void vkrt_stream_barrier(struct vkrt_device *dev, VkCommandBuffer cmd);
/* A transfer command (copy, fill) recorded after vkrt_stream_next: the next barrier waits
 * for the transfer stage too (vkrt_stream_next counts a tracked command as a dispatch). */
void vkrt_stream_note_transfer(struct vkrt_device *dev);
/* The lab's: barriers wait for compute and transfer whatever ran before them (true), or
 * for the stages used since the last one (false, the default). */
void vkrt_stream_set_full_barrier_stages(struct vkrt_device *dev, bool full);
/* The barrier every submitted command buffer ends with (stream and uploads): all writes
 * before it are visible to every later command on the queue and, with `host`, to the host. */
void vkrt_stream_close_barrier(struct vkrt_device *dev, VkCommandBuffer cmd, bool host);
/* The overlap's cap: a piece is submitted after at most `ops` commands (0: only vkrt_submit
 * and the collectives submit). */
void vkrt_stream_set_flush_ops(struct vkrt_device *dev, uint32_t ops);
/* How long waits and the submitter spin before blocking (any thread, any time). */
void vkrt_stream_set_spin_ns(struct vkrt_device *dev, uint64_t spin_ns);
uint64_t vkrt_stream_spin_ns(const struct vkrt_device *dev);
/* Attach a wait/signal to the next submit. */
vkrt_status vkrt_stream_add_wait(struct vkrt_device *dev, VkSemaphore sem, uint64_t value);
vkrt_status vkrt_stream_add_signal(struct vkrt_device *dev, VkSemaphore sem, uint64_t value);
/* Drops the waits on `sem` attached to the next submit (a transport about to destroy it). */
void vkrt_stream_detach_waits(struct vkrt_device *dev, VkSemaphore sem);
/* Ends and submits what was recorded (an empty submit when nothing was, so attached
 * waits/signals still happen); *out_value (may be NULL) is the timeline value. */
vkrt_status vkrt_stream_submit(struct vkrt_device *dev, uint64_t *out_value);
/* Whether a submit would send anything: commands, attached waits, signals or a tail. */
bool vkrt_stream_pending(const struct vkrt_device *dev);
/* From now on the submits of dev with waits or signals attached (a collective's), and those
 * after them while any is queued, are made by the device's submitter thread (started here; joined by the
 * stream's finish). For transports whose waits can block vkQueueSubmit until the peer's
 * signal (NVIDIA blocks there for a semaphore of another VkDevice: one queue hand-over,
 * ~357 us, inside vkrt_allreduce). */
vkrt_status vkrt_stream_defer_waits(struct vkrt_device *dev);
/* Whether the stream can take a tail now: it defers (its submitter and the tails' command
 * buffers exist), is not capturing (a graph records everything inline), has nothing recorded
 * since its last submit and no tail attached. */
bool vkrt_stream_tail_ok(const struct vkrt_device *dev);
/* Attaches `tail` to the next submit (vkrt_stream_tail_ok first): its commands run after
 * that submit's waits, before the commands recorded from now on. */
void vkrt_stream_add_tail(struct vkrt_device *dev, const struct vkrt_stream_tail *tail);
/* Returns once every deferred submit of dev was made (before waiting for the queue to go
 * idle or destroying semaphores a queued batch names). */
void vkrt_stream_drain(struct vkrt_device *dev);
/* Graph capture: begin submits what dev's stream recorded (so the capture starts on an
 * empty stream), then routes recording into cap until _end, which closes an open batch.
 * While capturing, the stream never flushes by itself. */
vkrt_status vkrt_stream_capture_begin(struct vkrt_device *dev, struct vkrt_stream_capture *cap);
vkrt_status vkrt_stream_capture_end(struct vkrt_device *dev);
/* The last stream value the GPU has finished; UINT64_MAX when it cannot say (a lost device
 * runs nothing more). Never blocks; any thread. */
uint64_t vkrt_stream_done(struct vkrt_device *dev);
/* Work recorded on raw handles (a collective's) uses b: a destroy waits for the submit that
 * carries it (no-op while capturing: a launch notes the use). */
void vkrt_stream_note_use(struct vkrt_device *dev, const struct vkrt_buffer *b);
/* Lists b among the buffers the capture uses (no-op when dev is not capturing). */
void vkrt_stream_capture_use(struct vkrt_device *dev, const struct vkrt_buffer *b);
/* Submits `count` captured batches in one vkQueueSubmit after what the stream submitted:
 * batch i signals the stream timeline at submitted + 1 + i (written into b), and every other
 * wait and signal value is the captured one plus `shift` (written into `values`, laid out
 * as the batches' waits then signals, each batch after the last). Through the submitter
 * thread when the stream defers and a batch has waits or signals. *out_value: the last
 * batch's timeline value. */
vkrt_status vkrt_stream_submit_captured(struct vkrt_device *dev, struct vkrt_stream_batch *b,
                                        const struct vkrt_stream_batch *captured, uint32_t count,
                                        uint64_t shift, uint64_t *out_value);
/* Live check: true when buffer `id` (created on this system) is not destroyed. Walks the
 * live list: call only after buffers_destroyed moved. */
bool vkrt_system_buffers_alive(struct vkrt_system *sys, const uint64_t *sorted_ids, uint32_t count,
                               uint32_t *first_dead);
/* Waits until the stream timeline reaches value. */
vkrt_status vkrt_stream_wait(struct vkrt_device *dev, uint64_t value, uint64_t timeout_ns);

/* Buffers touched by both the compute and a separate transfer queue family are created
 * CONCURRENT over the two, so uploads on the transfer queue need no ownership transfer. */
static inline void vkrt_device_buffer_sharing(struct vkrt_device *dev, VkBufferCreateInfo *info) {
  if (dev->transfer_family == dev->compute_family)
    return;
  dev->queue_families[0] = dev->compute_family;
  dev->queue_families[1] = dev->transfer_family;
  info->sharingMode = VK_SHARING_MODE_CONCURRENT;
  info->queueFamilyIndexCount = 2;
  info->pQueueFamilyIndices = dev->queue_families;
}

/* A linear R32_UINT image of width x height texels, a copy destination whose memory keeps its
 * contents on its first layout transition (PREINITIALIZED): the loads' row images. */
static inline VkImageCreateInfo vkrt_row_image_info(uint32_t width, uint32_t height) {
  return (VkImageCreateInfo){.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
                             .imageType = VK_IMAGE_TYPE_2D,
                             .format = VK_FORMAT_R32_UINT,
                             .extent = {width, height, 1},
                             .mipLevels = 1,
                             .arrayLayers = 1,
                             .samples = VK_SAMPLE_COUNT_1_BIT,
                             .tiling = VK_IMAGE_TILING_LINEAR,
                             .usage = VK_IMAGE_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
                             .initialLayout = VK_IMAGE_LAYOUT_PREINITIALIZED};
}

/* Imports host memory [host, host + size) (aligned to minImportedHostPointerAlignment) as a
 * VkBuffer of `usage` bound to VkDeviceMemory (VK_EXT_external_memory_host), preferring a
 * memory type with `preferred` flags. On failure nothing is left allocated. */
VkResult vkrt_device_import_host_pointer(struct vkrt_device *dev, void *host, uint64_t size,
                                         VkBufferUsageFlags usage, VkMemoryPropertyFlags preferred,
                                         VkBuffer *out_buffer, VkDeviceMemory *out_memory);

/* A status with "devN: what range ... is outside the buffer" when [offset, +size) is not
 * inside b. */
vkrt_status vkrt_buffer_check_range(const vkrt_buffer *b, uint64_t offset, uint64_t size,
                                    const char *what);

/* Recorded work on dev's stream uses b: a destroy before it retires is deferred. */
static inline void vkrt_buffer_note_use(const struct vkrt_buffer *b, uint64_t value) {
  _Atomic uint64_t *last = &((struct vkrt_buffer *)b)->last_use;
  if (value > atomic_load_explicit(last, memory_order_relaxed)) /* only the recorder writes */
    atomic_store_explicit(last, value, memory_order_relaxed);
}
/* Frees dev's destroyed buffers whose last use has retired (all of them with `all`, once
 * the device is idle or lost). */
void vkrt_buffer_reap(struct vkrt_device *dev, bool all);

/* Creates a buffer of `usage` on dev with memory of `required` properties. */
vkrt_status vkrt_buffer_create_internal(struct vkrt_device *dev, uint64_t size, uint32_t flags,
                                        VkBufferUsageFlags extra_usage, struct vkrt_buffer **out);

/* Bring-up and tear-down (system.c): options -> board -> instance -> devices with their
 * streams. vkrt_system_open fills a zeroed sys (allocated by the caller with the
 * allocator of `options`); on failure the caller still calls vkrt_system_close, which
 * unwinds what was made. */
vkrt_status vkrt_system_open(struct vkrt_system *sys, const vkrt_options *options);
void vkrt_system_close(struct vkrt_system *sys);
/* Waits for every device to go idle (before the wings release what the GPU may use). */
void vkrt_system_wait_idle(struct vkrt_system *sys);
/* The device `device` of sys, or a status with a message when it does not exist. */
vkrt_status vkrt_system_device(struct vkrt_system *sys, uint32_t device, struct vkrt_device **out);
/* The system behind a public appliance handle: struct vkrt_appliance (runtime/appliance) starts
 * with it (a _Static_assert there says so), so the public functions of the device layer's own
 * objects (vkrt_buffer_create) take the handle without knowing the wings. */
static inline struct vkrt_system *vkrt_handle_system(vkrt_appliance *app) {
  return (struct vkrt_system *)(void *)app;
}
