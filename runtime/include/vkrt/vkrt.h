/* libvkrt public API. Opaque handles only: this header never includes vulkan.h, nor the
 * build's generated vkrt/config.h: it is one interface for every configuration, and
 * vkrt_config_has() says what a build has. Every name it defines starts with vkrt_ or VKRT_.
 *
 * Threading: an appliance may be used from several threads. Uploads/downloads and host
 * registration are thread-safe. Recording ops into one device's stream is not: record a
 * given device from one thread at a time. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vkrt/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VKRT_MAX_DEVICES 8

typedef struct vkrt_appliance vkrt_appliance;
typedef struct vkrt_buffer vkrt_buffer;

/* ---- allocator and log ---------------------------------------------------------------- */

/* One host allocator for everything libvkrt and the Vulkan driver allocate on its behalf.
 * alignment is a power of two; free(NULL) must be a no-op. */
typedef struct vkrt_allocator {
  void *user;
  void *(*alloc)(void *user, size_t size, size_t alignment);
  void *(*realloc)(void *user, void *ptr, size_t size, size_t alignment);
  void (*free)(void *user, void *ptr);
} vkrt_allocator;

/* The libc-backed default (aligned_alloc/realloc/free). */
vkrt_allocator vkrt_allocator_system(void);

typedef enum vkrt_log_level {
  VKRT_LOG_ERROR = 0,
  VKRT_LOG_WARN = 1,
  VKRT_LOG_INFO = 2,
  VKRT_LOG_DEBUG = 3,
} vkrt_log_level;

typedef void (*vkrt_log_fn)(void *user, vkrt_log_level level, const char *message);

/* ---- build configuration --------------------------------------------------------------- */

/* The source version libvkrt.a was built from (git describe, e.g. "v1.0-3-g8f49900";
 * "unknown" outside git). The tools print it with --version. */
const char *vkrt_version(void);
/* Whether this build's Kconfig symbol is set to y, e.g.
 * vkrt_config_has("CONFIG_VKRT_TRANSPORT_MPI") (the CONFIG_ prefix may be left out); false
 * for a symbol that is n or unknown. For a caller that must know what the linked libvkrt.a
 * was built with, without compiling against its generated vkrt/config.h. */
bool vkrt_config_has(const char *symbol);
/* The symbol's value as .config spells it ("y", "n", "5000", a string without its quotes);
 * NULL for an unknown symbol. */
const char *vkrt_config_value(const char *symbol);

/* ---- fault injection (tests and benches) -------------------------------------------------
 * Compiled in only with CONFIG_VKRT_FAULT_INJECTION=y (vkrt_config_has says): without it
 * vkrt_open refuses options.faults other than all zero with VKRT_ERROR_UNSUPPORTED, and the
 * functions below answer VKRT_ERROR_UNSUPPORTED. */

enum vkrt_fault_bits {
  VKRT_FAULT_HIDE_EXTERNAL_SEMAPHORE_FD = 1u << 0, /* device pretends the FD functions are absent */
  VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST = 1u << 1,  /* device pretends host import is absent */
  VKRT_FAULT_IMPORT_FAILS = 1u << 2,               /* host-pointer import returns OOM (file-backed case) */
  VKRT_FAULT_PRESTAGE_ALLOC_FAILS = 1u << 3,       /* pre-stage allocation fails */
  VKRT_FAULT_PEER_STALL = 1u << 4,                 /* device never signals its collective contribution */
  VKRT_FAULT_DEVICE_LOST = 1u << 5,                /* device reports VK_ERROR_DEVICE_LOST on submit */
  VKRT_FAULT_HIDE_TRANSFER_QUEUE = 1u << 6,        /* ignore dedicated transfer queues */
  VKRT_FAULT_HOST_STALL = 1u << 7,                 /* multi-host: this host never sends its
                                                      inter-host contribution (a stalled host) */
  VKRT_FAULT_REFUSE_FILE_BACKED = 1u << 8,         /* act as a driver that refuses importing
                                                      file-backed pages (NVIDIA 580, RADV) */
};

typedef struct vkrt_fault_options {
  uint32_t mask;            /* vkrt_fault_bits */
  uint32_t device_mask;     /* which devices the mask applies to; 0 = all */
  uint32_t host_alloc_fail_at;   /* fail the Nth host allocation (1-based; 0 = never) */
  uint32_t vulkan_alloc_fail_at; /* fail the Nth vkAllocateMemory (1-based; 0 = never) */
  uint64_t import_chunk_cap;     /* bytes; forces many import chunks (0 = Kconfig cap) */
  /* Tests and benches: run another import policy than the Kconfig choice.
   * 0 = CONFIG_VKRT_IMPORT_POLICY_ID, else 1 + a vkrt_import_policy value. */
  uint32_t import_policy_override;
  /* Sleep (microseconds, < 10^6) between an upload dropping the last reference to a
   * registered region and its wakeup of a waiting unregister: widens that race window. */
  uint32_t release_delay_us;
  /* Called by the upload that drops the last reference to a registered region, after that
   * drop (and the delay above) and before its wakeup of a waiting unregister, with
   * release_hook_user. A test unregisters the region from it: the interleaving in which the
   * region is freed while its last release is still running, every time. */
  void (*release_hook)(void *user);
  void *release_hook_user;
} vkrt_fault_options;

/* Re-arms the allocation-failure counters of an open appliance: from now on the Nth host
 * allocation libvkrt itself makes (through the injected allocator; the driver's allocations
 * through the same allocator are counted live but never failed) and the Nth vkAllocateMemory
 * fail (0 = never). Lets a test fail allocations of one call only. */
vkrt_status vkrt_fault_arm_allocations(struct vkrt_appliance *appliance,
                                       uint32_t host_alloc_fail_at,
                                       uint32_t vulkan_alloc_fail_at);
/* How many of those allocations were made since vkrt_open or the last
 * vkrt_fault_arm_allocations, so a failure matrix knows how many there are to fail. */
vkrt_status vkrt_fault_allocation_counts(const struct vkrt_appliance *appliance,
                                         uint32_t *host_allocations,
                                         uint32_t *vulkan_allocations);

/* ---- open / close -------------------------------------------------------------------- */

typedef enum vkrt_pipelines {
  VKRT_PIPELINES_AUTO = 0,     /* at open on GPUs, on first use on CPU devices */
  VKRT_PIPELINES_AT_OPEN = 1,  /* every usable kernel's pipelines built by vkrt_open */
  VKRT_PIPELINES_ON_FIRST_USE = 2,
} vkrt_pipelines;

/* How quantized-weight matmul (Q8_0, Q4_K, Q6_K w) takes its f32 activations x
 * (vkrt_options.quant_activations). VKRT_ACTIVATIONS_Q8 rounds x only up to this K (the
 * rounded x lives in the workgroup's shared memory). */
#define VKRT_ACTIVATIONS_Q8_MAX_K 16384
/* ... and for 2 to 8 columns of x (vkrt_options.quant_activations_columns) up to this K. */
#define VKRT_ACTIVATIONS_Q8_COLUMNS_MAX_K 12288
typedef enum vkrt_quant_activations {
  VKRT_ACTIVATIONS_F32 = 0, /* x as given: the result is the exact product up to f32 rounding
                               of the accumulation */
  VKRT_ACTIVATIONS_Q8 = 1,  /* for one column of x (M = 1, the decode case), K <= 16384, x
                               16-byte aligned (Q4_K rows too) on devices with integer dot
                               products: x rounded to 8 bits per 32 values (scale max|x| / 127,
                               as ggml's q8_1 path does) and multiplied by integer dot
                               products, faster; adds an error of at most
                               sum_k |w_k| max|x|_32(k) / 254. Other cases as F32
                               (small batches: vkrt_options.quant_activations_columns).
                               Also vkrt_op_attention over a q8_0 cache where it runs a
                               row per invocation (long contexts on GPUs): the scaled
                               queries rounded so, the scores by integer dot products. */
} vkrt_quant_activations;

/* How vkrt_op_matmul multiplies many columns of x (vkrt_options.matmul_activations): M at or
 * past the device's crossover, where the tiled kernel runs (vkrt-probe prints the crossovers
 * and which tiles run). */
typedef enum vkrt_matmul_activations {
  VKRT_MATMUL_ACTIVATIONS_F32 = 0, /* x as given, f32 products and sums: the result is the
                                      exact product up to f32 rounding of the accumulation */
  VKRT_MATMUL_ACTIVATIONS_F16 = 1, /* on devices with cooperative matrices
                                      (VK_NV_cooperative_matrix, 32-wide subgroups): f16, Q8_0,
                                      Q4_K and Q6_K weights and x rounded to f16 (as ggml's
                                      cooperative-matrix path does), multiplied with f32 sums,
                                      many times faster; adds an error of at most
                                      2^-10 sum_k |w_k x_k| (each factor rounded to 11
                                      significant bits), and |x| past 65504 becomes infinite.
                                      f32 weights, vkrt_op_matmul_add and other devices as
                                      F32. */
} vkrt_matmul_activations;

typedef struct vkrt_options {
  vkrt_allocator allocator;
  vkrt_log_fn log;          /* NULL: messages are dropped */
  void *log_user;
  vkrt_log_level log_level; /* messages above it are not formatted */
  /* Device selection overrides; 0 / empty keep the board's Kconfig values. */
  uint32_t device_count;
  int32_t physical_device_index[VKRT_MAX_DEVICES]; /* -1 = board rule */
  bool simulated;           /* force N logical devices on one physical device */
  bool physical_only;       /* force one VkDevice per physical device even on a simulated
                               board (overrides `simulated`) */
  bool enable_validation;   /* Khronos validation layer; messages are counted */
  bool enable_sync_validation; /* also synchronization validation */
  uint64_t collective_timeout_ns; /* 0 = CONFIG_VKRT_COLLECTIVE_TIMEOUT_MS */
  /* A vkrt_transport_kind: 0 (VKRT_TRANSPORT_NONE) = the planner's choice; otherwise only
   * that transport is considered and open fails when it is not usable (benches, tests). */
  uint32_t collective_transport;
  /* Multi-host appliance (CONFIG_VKRT_TRANSPORT_MPI): set only by vkrt_mpi_options_set() in
   * vkrt/vkrt_mpi.h, which stores the application's communicator as its Fortran handle
   * (MPI_Comm_c2f) so this header needs no mpi.h. false: this host is the whole appliance. */
  bool mpi;
  int64_t mpi_comm;
  /* When the compute pipelines of the compiled kernels are built (a vkrt_pipelines value):
   * VKRT_PIPELINES_AUTO (0) at open on GPUs, so the first dispatch allocates and compiles
   * nothing, and on first use on CPU devices (lavapipe), where compiling all of them costs
   * seconds per open; vkrt-probe and the log say which. */
  uint32_t pipelines;
  uint32_t quant_activations; /* a vkrt_quant_activations value; vkrt-probe says which path */
  uint32_t matmul_activations; /* a vkrt_matmul_activations value; vkrt-probe says which */
  /* The most columns of x (M) that VKRT_ACTIVATIONS_Q8 rounds: 0 or 1, one column only (the
   * decode case; the default); 2..8, small batches (a few sequences, speculative decoding)
   * of Q8_0 and Q4_K w too, K <= VKRT_ACTIVATIONS_Q8_COLUMNS_MAX_K, x and Q4_K rows 16-byte
   * aligned, from the M where the device's 8-bit columns beat f32 x (vkrt-probe prints both),
   * with VKRT_ACTIVATIONS_Q8's error bound; f32 x for the rest. Ignored under
   * VKRT_ACTIVATIONS_F32; more than 8 is refused by vkrt_open. */
  uint32_t quant_activations_columns;
  /* GPUs: how long a wait for a device's work (vkrt_wait, vkrt_finish) spins on its timeline
   * before it blocks in the driver, in microseconds; 0 = 2000, the default; at most
   * 10000000. A blocked wait returns ~90 us after the work on NVIDIA (H100, driver 580), so a
   * service that owns its host and waits for tokens of a few ms spins through them (vkrt-service
   * asks for 20000: Llama-3-8B q4_K decode 329 -> 343 tokens/s); a spinning wait keeps a CPU
   * busy, which costs other processes of a shared host. CPU devices never spin (they run the
   * work on those cores). */
  uint32_t wait_spin_us;
  vkrt_fault_options faults; /* all zero unless testing (see fault injection above) */
} vkrt_options;

/* Fills defaults: system allocator, no log, board device selection, no validation. */
void vkrt_options_initialize(vkrt_options *options);

/* Opens the board's devices. *out is NULL on failure; the reason is in the log and, when
 * error_message is non-NULL, copied there (up to error_message_size bytes). */
vkrt_status vkrt_open(const vkrt_options *options, vkrt_appliance **out,
                      char *error_message, size_t error_message_size);
/* Waits for all work, joins every thread, frees everything. NULL is a no-op. */
void vkrt_close(vkrt_appliance *appliance);

/* Errors: every call that gets an appliance (directly or through a buffer or tensor) and
 * fails records a message saying why; only a call with no appliance to reach (NULL appliance,
 * NULL buffer) returns its status without one.
 *
 * The message of the last error status this thread got from a call on this appliance
 * ("no error" when none). Each thread has its own: a failure on another thread never
 * overwrites it. Valid until this thread's next failing call. Never NULL. */
const char *vkrt_last_error(const vkrt_appliance *appliance);
/* Number of validation-layer messages reported since open (0 without validation). */
uint32_t vkrt_validation_message_count(const vkrt_appliance *appliance);

uint32_t vkrt_device_count(const vkrt_appliance *appliance);

typedef struct vkrt_device_info {
  char name[256];
  char driver_name[256];
  uint32_t vendor_id;
  uint32_t device_id;
  uint32_t physical_index; /* index in loader enumeration */
  uint8_t device_uuid[16];
  uint8_t driver_uuid[16];
  bool has_transfer_queue;
  bool external_memory_host;
  bool external_semaphore_fd;
  uint64_t device_local_bytes;
  /* vkrt_op_matmul's tiled kernel takes x and w rounded to f16 on cooperative matrices here:
   * opened with VKRT_MATMUL_ACTIVATIONS_F16, the device has them (VK_NV_cooperative_matrix,
   * 32-wide subgroups) and the build their kernels (CONFIG_VKRT_KERNEL_MATMUL_COOPMAT);
   * false: the f32 paths (vkrt_describe's "matmul:" line says why). */
  bool matmul_f16;
} vkrt_device_info;

vkrt_status vkrt_device_info_get(const vkrt_appliance *appliance, uint32_t device,
                                 vkrt_device_info *out);

/* ---- buffers ------------------------------------------------------------------------- */

enum vkrt_buffer_flags {
  VKRT_BUFFER_DEVICE_LOCAL = 0,
  VKRT_BUFFER_HOST_VISIBLE = 1u << 0, /* host-visible, coherent; vkrt_buffer_map works */
};

vkrt_status vkrt_buffer_create(vkrt_appliance *appliance, uint32_t device, uint64_t size,
                               uint32_t flags, vkrt_buffer **out);
/* The buffer is gone for the caller at once (a graph that uses it is refused); its memory
 * stays until the GPU has finished the work recorded on it, submitted or not, and is freed
 * by a later destroy on its device or at vkrt_close. NULL is a no-op. */
void vkrt_buffer_destroy(vkrt_buffer *buffer);
uint64_t vkrt_buffer_size(const vkrt_buffer *buffer);
uint32_t vkrt_buffer_device(const vkrt_buffer *buffer);
/* Host pointer of a HOST_VISIBLE buffer; VKRT_ERROR_INVALID_ARGUMENT otherwise. */
vkrt_status vkrt_buffer_map(vkrt_buffer *buffer, void **out);

/* ---- per-device command streams -------------------------------------------------------
 * Ops and collectives are recorded into the device's stream; vkrt_submit sends what was
 * recorded and returns a ticket; vkrt_wait blocks until the ticket's work is done. Results
 * are those of program order: an op, copy or fill waits for earlier recorded work whose
 * bytes it reads or overwrites (or that read what it writes); ops on disjoint bytes may run
 * concurrently on the GPU (vkrt_lab_stream_get counts both). */

/* A size of 0 records nothing and returns VKRT_OK (after the NULL and same-device checks). */
vkrt_status vkrt_cmd_copy_buffer(vkrt_buffer *dst, uint64_t dst_offset, vkrt_buffer *src,
                                 uint64_t src_offset, uint64_t size);
/* Fills with a 32-bit pattern: offset and size multiples of 4; size 0 is a no-op (VKRT_OK). */
vkrt_status vkrt_cmd_fill(vkrt_buffer *dst, uint64_t offset, uint64_t size, uint32_t value);
vkrt_status vkrt_submit(vkrt_appliance *appliance, uint32_t device, uint64_t *out_ticket);
vkrt_status vkrt_wait(vkrt_appliance *appliance, uint32_t device, uint64_t ticket,
                      uint64_t timeout_ns);
/* submit + wait on one device. */
vkrt_status vkrt_finish(vkrt_appliance *appliance, uint32_t device);

/* ---- host memory: registration, upload, download -------------------------------------- */

typedef enum vkrt_import_path {
  VKRT_IMPORT_PATH_IMPORTED = 0, /* the caller's pages are imported */
  VKRT_IMPORT_PATH_PRESTAGED,    /* one anonymous copy, imported into every device */
  VKRT_IMPORT_PATH_STAGED,       /* not imported: uploads go through the staging ring */
} vkrt_import_path;

const char *vkrt_import_path_str(vkrt_import_path path);

/* The import fallback policies; values equal CONFIG_VKRT_IMPORT_POLICY_ID. */
typedef enum vkrt_import_policy {
  VKRT_IMPORT_POLICY_IMPORT_ONLY = 0,
  VKRT_IMPORT_POLICY_IMPORT_THEN_PRESTAGE = 1,
  VKRT_IMPORT_POLICY_ALWAYS_PRESTAGE = 2,
  VKRT_IMPORT_POLICY_STAGING_ONLY = 3,
  VKRT_IMPORT_POLICY_COUNT
} vkrt_import_policy;

/* "import-only", "import-then-prestage", "always-prestage", "staging-only". */
const char *vkrt_import_policy_str(vkrt_import_policy policy);
/* The policy this appliance registers with (Kconfig, or the test override). */
vkrt_import_policy vkrt_import_policy_get(const vkrt_appliance *appliance);

typedef void (*vkrt_progress_fn)(void *user, uint64_t done_bytes, uint64_t total_bytes);

typedef struct vkrt_register_info {
  vkrt_import_path path[VKRT_MAX_DEVICES]; /* per device */
  uint32_t chunk_count;
  char reason[VKRT_MAX_DEVICES][160];      /* why each device took its path */
} vkrt_register_info;

/* Registers [ptr, ptr + size) (e.g. a read-only mmap of a weights file) per the board's
 * import policy. progress may be NULL. info may be NULL. */
vkrt_status vkrt_host_register(vkrt_appliance *appliance, const void *ptr, uint64_t size,
                               vkrt_progress_fn progress, void *progress_user,
                               vkrt_register_info *info);
vkrt_status vkrt_host_unregister(vkrt_appliance *appliance, const void *ptr);

/* Synchronous copies between host memory and a buffer; registered sources DMA straight
 * from their chunks, others go through the staging ring. Thread-safe. A size of 0 (upload_2d:
 * width or height 0) is a no-op returning VKRT_OK, whatever the other arguments (a NULL
 * buffer still returns VKRT_ERROR_INVALID_ARGUMENT). */
vkrt_status vkrt_upload(vkrt_buffer *dst, uint64_t dst_offset, const void *src, uint64_t size);
vkrt_status vkrt_upload_2d(vkrt_buffer *dst, uint64_t dst_offset, uint64_t dst_pitch,
                           const void *src, uint64_t src_pitch, uint64_t width, uint64_t height);
vkrt_status vkrt_download(void *dst, vkrt_buffer *src, uint64_t src_offset, uint64_t size);

/* ---- loading a file: ranges of a file -> buffers on devices ----------------------------- */

/* How a file's bytes reach a device (vkrt_load_file). */
typedef enum vkrt_load_path {
  VKRT_LOAD_PATH_AUTO = 0,   /* per device: mapped where the device imports file pages, else
                                read or direct by how much of the file the page cache holds */
  VKRT_LOAD_PATH_MAPPED,     /* mmap + vkrt_host_register (imported / pre-staged / staged per
                                the import policy) + one upload per range */
  VKRT_LOAD_PATH_READ,       /* pread() into pinned chunks every device imports, chunk i + 1
                                read (many threads) while chunk i is DMA'd to every device */
  VKRT_LOAD_PATH_DIRECT,     /* the same with O_DIRECT (page cache bypassed: cold files) */
  VKRT_LOAD_PATH_MEMCPY,     /* the same with memcpy from a read-only mapping of the file
                                instead of pread (a file truncated while it loads raises
                                SIGBUS on this path; never chosen by AUTO) */
  VKRT_LOAD_PATH_COUNT
} vkrt_load_path;

/* "auto", "mapped", "read", "direct", "memcpy". */
const char *vkrt_load_path_str(vkrt_load_path path);

/* One slice of the file into one buffer: `rows` rows of `size` bytes, row i read from
 * file_offset + i * file_pitch and written at dst_offset + i * dst_pitch (rows 0 or 1: one
 * contiguous run, pitches ignored). A range of size 0 writes nothing; its offsets must
 * still lie within the file and the buffer. */
typedef struct vkrt_load_range {
  uint64_t file_offset, size;
  vkrt_buffer *dst;
  uint64_t dst_offset;
  uint64_t rows, file_pitch, dst_pitch;
} vkrt_load_range;

typedef struct vkrt_load_info {
  vkrt_load_path path[VKRT_MAX_DEVICES];          /* what each device took */
  vkrt_import_path import_path[VKRT_MAX_DEVICES]; /* for VKRT_LOAD_PATH_MAPPED */
  char reason[VKRT_MAX_DEVICES][200];             /* why */
  uint64_t file_size;
  uint64_t bytes;          /* range bytes written to the devices */
  uint64_t read_bytes;     /* bytes read from the file by the read/direct/memcpy paths (4 KiB
                              aligned, small gaps between ranges read through: each needed
                              byte once, whatever the number of devices needing it) */
  uint64_t ns;             /* wall time of the load */
  uint32_t threads;        /* threads reading or copying */
  uint32_t chunk_count;    /* import chunks of the mapped path's registration (0: none) */
  double resident;         /* fraction of the file in the page cache at the start (-1: not
                              measured) */
  /* The structure of the read/direct/memcpy paths (all 0 when no device took them): */
  uint64_t pinned_chunk_bytes; /* one pinned chunk (file bytes; + as much again for gathers
                                  when narrow rows are loaded) */
  uint32_t pinned_chunks;  /* chunks in the ring, reused in turn */
  uint32_t chunk_fills;    /* chunks read and DMA'd */
  uint64_t copies;         /* DMA regions recorded, all devices */
  uint64_t gathered_bytes; /* bytes of narrow rows (strided ranges) packed by the host into
                              one DMA region per range and chunk */
  uint64_t setup_ns;       /* from the call to the first read: checks, plan, pinned memory */
  uint64_t read_busy_ns;   /* summed over the threads: inside pread / memcpy from the file */
  uint64_t wait_dma_ns;    /* summed over the threads: waiting for a chunk's DMA to retire
                              before reusing its memory (large: the DMA is the bottleneck) */
  uint64_t wait_read_ns;   /* the submitting thread waiting for a chunk's reads (large: the
                              reads are the bottleneck) */
  uint64_t tail_ns;        /* from the last submit until every device's copies retired */
  uint64_t row_region_bytes; /* bytes of narrow rows left in the chunk where the file has
                                them, one DMA region per row (not packed) */
  uint64_t resident_ns;    /* in setup_ns: measuring the page cache's share of the file */
  uint64_t import_ns;      /* importing the pinned chunks into the devices: the first in
                              setup_ns, then the submitting thread's waits for the others
                              (every thread of the load imports them as it starts) */
  uint64_t packed_while_reading_bytes; /* of gathered_bytes, those packed by the reading
                                          threads right after reading their block (the rest
                                          was packed once its whole chunk was read) */
  uint64_t row_image_bytes; /* bytes of narrow rows moved by one 2D copy per range and chunk
                               into a linear image aliasing the destination (no host packing) */
  uint32_t row_images;      /* ranges that had such an image */
  uint32_t submits;         /* submissions of chunk fills: a run of chunks goes to each device
                               in one vkQueueSubmit (chunk_fills: one each, by default) */
  uint64_t release_ns;      /* after the copies retired: the pinned chunks' imports freed and
                               unmapped, the load's own objects destroyed */
} vkrt_load_info;

/* Loads ranges of the file at `path` (or of `fd` when path is NULL; it is only read with
 * pread or mapped read-only, never closed) into buffers: every device's ranges in flight at
 * once, the file read once in file order. `force` picks one path for every device
 * (VKRT_LOAD_PATH_AUTO: chosen per device, logged with why). Every range is checked before
 * any byte moves: past the end of the file, outside its buffer, or overlapping another
 * range's destination fails with a message and nothing written; a file that shrinks during
 * the load fails too (the buffers then hold a partial load). progress (may be NULL) is
 * called from the calling thread with bytes done so far, monotone, the last call with
 * done == total. info may be NULL. Nothing is left allocated, mapped or pinned when the
 * call returns. */
vkrt_status vkrt_load_file(vkrt_appliance *appliance, const char *path, int fd,
                           const vkrt_load_range *ranges, uint32_t count, vkrt_load_path force,
                           vkrt_progress_fn progress, void *progress_user, vkrt_load_info *info);

/* Which path uploads took, counted since open (per appliance, all devices): each VkBufferCopy
 * region recorded is one copy. Tests assert the path, not only the bytes; vkrt-probe --json
 * --exercise shows them after a small run. Uploads into host-visible buffers (CPU memcpy) and
 * downloads are not counted. */
typedef struct vkrt_upload_counters {
  uint64_t imported_bytes, imported_copies;   /* from chunks over the caller's pages */
  uint64_t prestaged_bytes, prestaged_copies; /* from chunks of a pre-staged copy */
  uint64_t staged_bytes, staged_copies;       /* through the staging ring */
  uint64_t straddles_split;   /* upload rows crossing chunk boundaries, split per chunk */
  uint64_t copies_past_chunk; /* chunk copies whose source left their chunk's buffer: a bug
                                 if ever non-zero (caught here even without validation) */
} vkrt_upload_counters;

vkrt_status vkrt_upload_counters_get(const vkrt_appliance *appliance, vkrt_upload_counters *out);

/* ---- tensors and ops ------------------------------------------------------------------- */

typedef enum vkrt_type {
  VKRT_TYPE_F32 = 0,
  VKRT_TYPE_F16 = 1,
  /* Block-quantized weights, bit-compatible with ggml/GGUF (GGML_TYPE_Q8_0, GGML_TYPE_Q4_K,
   * GGML_TYPE_Q6_K):
   * Q8_0: blocks of 32 weights in 34 bytes: f16 d, int8 q[32]; w = d * q.
   * Q4_K: super-blocks of 256 weights in 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit
   *       scales/mins for 8 sub-blocks of 32, 128 bytes of 4-bit quants;
   *       w = d * scale[j] * q - dmin * min[j].
   * Q6_K (VKRT_TYPE_Q6_K below): super-blocks of 256 weights in 210 bytes: ql[128] (low 4
   *       bits), qh[64] (high 2 bits), int8 scales[16] (one per 16 weights), f16 d at byte
   *       208; w = d * scale[j] * (q - 32), q the 6-bit value. */
  VKRT_TYPE_Q8_0 = 2,
  VKRT_TYPE_Q4_K = 3,
  /* 32-bit signed integers: token ids, row indices and positions (GGML_TYPE_I32). */
  VKRT_TYPE_I32 = 4,
  /* Q6_K (above): the output head and part of ffn_down / attn_v of ggml's "Q4_K_M" files.
   * Taken where Q4_K is: vkrt_op_matmul's w (M <= 8 on its own matrix-vector kernels, with x
   * in f32 whatever vkrt_options.quant_activations says), vkrt_op_copy's src (dequantizing
   * into f32/f16), vkrt_op_get_rows' table and vkrt_dequantize_row; offsets 2-byte aligned
   * (blocks are 210 bytes: rows start on any even byte). */
  VKRT_TYPE_Q6_K = 5,
  VKRT_TYPE_COUNT
} vkrt_type;

/* Bytes per block (per element for f32/f16), as ggml_type_size; 0 for an invalid type. */
size_t vkrt_type_size(vkrt_type type);
/* Elements per block: 1 for f32/f16, 32 for Q8_0, 256 for Q4_K and Q6_K; 0 for an invalid
 * type. */
uint32_t vkrt_type_block(vkrt_type type);
/* "f32", "f16", "q8_0", "q4_K", "i32", "q6_K" (the ggml names); "?" for an invalid type. */
const char *vkrt_type_str(vkrt_type type);
/* CPU dequantization of n elements (a multiple of the block) of a dense row of `type` into
 * f32, straight from the format's definition: the reference the kernels are tested against
 * (f32 and f16 rows are converted too). INVALID_ARGUMENT for a bad type or n. */
vkrt_status vkrt_dequantize_row(vkrt_type type, const void *src, float *dst, int64_t n);
/* The other way, for the types vkrt_op_set_rows writes: n f32 values (a multiple of the
 * block) into a dense row of f32 (bits moved), f16 (rounded to nearest even) or q8_0 (ggml's
 * quantize_row_q8_0: d = max|x| / 127, q = roundf(x / d), d as f16), bit for bit what the
 * op stores. INVALID_ARGUMENT for another type or a bad n. */
vkrt_status vkrt_quantize_row(vkrt_type type, const float *src, void *dst, int64_t n);

/* ggml convention: ne[] element counts, nb[] byte strides, dim 0 innermost.
 * Block types (Q8_0, Q4_K, Q6_K) follow ggml too: ne[0] a multiple of the block, nb[0] the
 * block size in bytes (blocks dense along dim 0), nb[1..3] whole blocks, the offset a
 * multiple of 2 bytes (Q8_0, Q6_K) or 4 bytes (Q4_K); they are taken by vkrt_op_matmul as w,
 * by vkrt_op_get_rows as the table and by vkrt_op_copy as src (dequantizing into f32/f16, or
 * same-type dense byte copies).
 * The ops take ne[i] >= 1 (unused dims are 1; empty tensors are rejected), nb[i] >= 0 and
 * a multiple of the element size, an offset aligned to the element size, at most 2^31
 * elements, and every touched byte inside the buffer; a written tensor may not have two
 * elements at one address, nor overlap a source (vkrt_op_add: dst may be one source
 * exactly). Anything else returns VKRT_ERROR_INVALID_ARGUMENT with the reason. */
typedef struct vkrt_tensor {
  vkrt_buffer *buffer;
  uint64_t offset; /* bytes */
  vkrt_type type;
  int64_t ne[4];
  int64_t nb[4];
} vkrt_tensor;

/* Fills a contiguous descriptor (nb from ne and type). */
vkrt_tensor vkrt_tensor_contiguous(vkrt_buffer *buffer, uint64_t offset, vkrt_type type,
                                   int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

/* All ops record into the stream of the device that owns the buffers (all must be on one
 * device) and return VKRT_ERROR_UNSUPPORTED when their kernel is compiled out. */
vkrt_status vkrt_op_copy(const vkrt_tensor *dst, const vkrt_tensor *src);
/* dst = src with dims 0 and 1 swapped (dst->ne = {src.ne1, src.ne0, ne2, ne3}). */
vkrt_status vkrt_op_transpose(const vkrt_tensor *dst, const vkrt_tensor *src);
vkrt_status vkrt_op_concat(const vkrt_tensor *dst, const vkrt_tensor *a, const vkrt_tensor *b,
                           int dim);
/* dst = sum of srcs[0..count) element-wise, accumulated in f32; 1 <= count <= 8; every
 * tensor dense (contiguous), of dst's shape and type. */
vkrt_status vkrt_op_add(const vkrt_tensor *dst, const vkrt_tensor *const *srcs, uint32_t count);
/* dst[n, m] = sum_k w[k, n] * x[k, m]   (ggml mul_mat: w ne = {K, N}, x ne = {K, M},
 * dst ne = {N, M}); w f16, f32, q8_0, q4_K or q6_K, x and dst f32. M == 1 is the decode
 * (matrix-vector) case; quantized w takes its matrix-vector kernels for M <= 8 and runs them
 * over groups of 8 columns of x beyond. */
vkrt_status vkrt_op_matmul(const vkrt_tensor *dst, const vkrt_tensor *w, const vkrt_tensor *x);
/* dst += w x, same shapes, types and rules as vkrt_op_matmul (dst is read, then written):
 * the decode residual (x = x + W h) in one dispatch instead of a matmul and an add; every
 * weight type, the f32 sum of w x added to dst's value once. */
vkrt_status vkrt_op_matmul_add(const vkrt_tensor *dst, const vkrt_tensor *w, const vkrt_tensor *x);

/* The steps vkrt_op_matmul_fused folds into its product (zeroed: none). */
/* RoPE's parameters (vkrt_op_rope and the ops below that turn heads by position) */
typedef enum vkrt_rope_mode {
  VKRT_ROPE_NORMAL = 0, /* rotates adjacent pairs (x[2i], x[2i+1]): ggml mode 0, llama */
  VKRT_ROPE_NEOX = 2,   /* rotates (x[i], x[i + n_dims/2]): ggml GGML_ROPE_TYPE_NEOX */
} vkrt_rope_mode;

typedef struct vkrt_rope_params {
  uint32_t mode;     /* a vkrt_rope_mode */
  uint32_t n_dims;   /* rotated dims per head (even, <= head size); the rest is copied */
  float freq_base;   /* theta_i = pos * freq_scale * freq_base^(-2i / n_dims) */
  float freq_scale;  /* 1.0 without context scaling */
} vkrt_rope_params;

/* What a decode token's q/k/v product hands to attention, done in the product's dispatch
 * (vkrt_matmul_fusion.qkv): w's rows are n_head query heads, then n_head_kv K heads, then
 * n_head_kv V heads, head_dim rows each, so dst is {(n_head + 2 n_head_kv) head_dim, 1}.
 * After the op, dst's query heads are turned by RoPE at position pos[0] as vkrt_op_rope_ext
 * turns them (rope.mode VKRT_ROPE_NORMAL), dst's K and V heads hold the product, and row
 * pos[0] of k_cache holds the K heads turned the same way, row pos[0] of v_cache the V
 * heads, converted as vkrt_op_set_rows converts (a row outside the cache is skipped). So
 * vkrt_op_rope_ext, vkrt_op_rope_set_rows and vkrt_op_set_rows leave the token's dependent
 * chain: attention follows the product directly. */
typedef struct vkrt_qkv_fusion {
  const vkrt_tensor *pos;              /* I32, element 0 the position and the cache row */
  const vkrt_tensor *k_cache, *v_cache; /* f16 or q8_0 {n_head_kv head_dim, n_rows}, rows dense
                                          and 2-byte aligned, disjoint from every operand */
  const vkrt_tensor *rope_factors;     /* NULL, or f32 {>= n_dims / 2}: vkrt_op_rope_ext's */
  vkrt_rope_params rope;
  uint32_t n_head, n_head_kv, head_dim; /* head_dim a multiple of 32 */
} vkrt_qkv_fusion;

typedef struct vkrt_matmul_fusion {
  /* x RMS-normalized first, as vkrt_op_rms_norm(x, norm, eps) would: f32 {K}, dense; NULL:
   * x as it is */
  const vkrt_tensor *norm;
  float eps;
  /* w holds F gate rows, then F up rows ({K, 2F}); dst {F, 1} = silu(gate x) * (up x), the
   * formula of vkrt_op_swiglu */
  int swiglu;
  /* NULL, or the q/k/v product's RoPE and KV-cache rows (above; not with swiglu): q4_K and
   * q8_0 w on the 8-bit-x kernels only (VKRT_ACTIVATIONS_Q8, K up to
   * VKRT_ACTIVATIONS_Q8_MAX_K, a device with 16-bit storage); elsewhere
   * VKRT_ERROR_UNSUPPORTED with the reason */
  const vkrt_qkv_fusion *qkv;
} vkrt_matmul_fusion;

/* A decode token's matrix-vector product with the RMS norm before it and the SwiGLU after it
 * in the same dispatch: one dependent GPU step where vkrt_op_rms_norm, vkrt_op_matmul and
 * vkrt_op_swiglu take three (on the H200 each dependent step costs a few microseconds of
 * its own; a llama layer has four such steps to save). dst f32 {N, 1} ({F, 1} with swiglu),
 * x f32 {K, 1}, w {K, N}. The fused kernels: f16 and f32 w with rows 16-byte aligned and K
 * a multiple of 8 (f16) or 4 (f32) (without swiglu w may span several bindings, as
 * vkrt_op_matmul's may); q4_K w with rows 16-byte aligned; x (and norm) dense and 16-byte
 * aligned, one column; q8_0 w (rows at any alignment) too on an
 * appliance opened with quant_activations = VKRT_ACTIVATIONS_Q8, K up to
 * VKRT_ACTIVATIONS_Q8_MAX_K; any other valid call returns VKRT_ERROR_UNSUPPORTED with the
 * reason and records nothing (record the ops one by one). The values: those of the separate
 * ops up to f32 rounding (the norm's scale multiplies the row sums instead of x; the sum of
 * squares is the kernel's own). With VKRT_ACTIVATIONS_Q8, x g is rounded to 8 bits per 32
 * values where the one-column products would round x (K up to VKRT_ACTIVATIONS_Q8_MAX_K):
 * the same rounding as the separate ops' but of x g instead of the normalized x, so a value
 * at a rounding tie may fall the other way. */
vkrt_status vkrt_op_matmul_fused(const vkrt_tensor *dst, const vkrt_tensor *w, const vkrt_tensor *x,
                                 const vkrt_matmul_fusion *fusion);

/* dst = silu(gate) * up element-wise, silu(g) = g / (1 + e^-g) (the SwiGLU gate of a llama-style
 * MLP); f32, dense tensors of one shape; dst may be gate or up exactly (in place). */
vkrt_status vkrt_op_swiglu(const vkrt_tensor *dst, const vkrt_tensor *gate, const vkrt_tensor *up);

/* ---- transformer decode ops -------------------------------------------------------------
 * The ops a llama-architecture forward pass needs besides matmul, swiglu and add. Every
 * value that changes per token (positions, token ids, cache rows, the attended length) is
 * read from a device tensor of type VKRT_TYPE_I32, never from an argument, so recorded work
 * can be replayed for the next token after the caller updates those tensors. Each op's
 * kernel is a CONFIG_VKRT_KERNEL_* symbol; compiled out, the op answers UNSUPPORTED. */

/* dst = x / sqrt(mean(x_row^2) + eps) * w per row (ggml RMS_NORM followed by MUL): rows are
 * dim 0 of x (ne {n, rows, ...}); w f32 {n} (NULL: no multiply); x, dst f32 of one shape;
 * dst may be x exactly. */
vkrt_status vkrt_op_rms_norm(const vkrt_tensor *dst, const vkrt_tensor *x, const vkrt_tensor *w,
                             float eps);

/* Rotary position embedding: x, dst f32 {head_dim, n_head, n_tokens}; pos I32 {n_tokens}
 * (token t at position pos[t], read on the device; any int32, negative rotating backwards,
 * with f32 angles that lose precision past |pos| ~ 2^24); dst may be x exactly. */
vkrt_status vkrt_op_rope(const vkrt_tensor *dst, const vkrt_tensor *x, const vkrt_tensor *pos,
                         const vkrt_rope_params *params);
/* vkrt_op_rope with ggml's frequency factors (ggml_rope_ext's freq_factors; llama.cpp's
 * rope_freqs.weight of Llama 3.1 and later): pair p turns by theta_p / factors[p]. factors
 * f32 {n} with n >= n_dims / 2, read on the device; NULL is vkrt_op_rope. */
vkrt_status vkrt_op_rope_ext(const vkrt_tensor *dst, const vkrt_tensor *x, const vkrt_tensor *pos,
                             const vkrt_tensor *factors, const vkrt_rope_params *params);

/* Embedding lookup (ggml GET_ROWS): dst[:, i] = table[:, ids[i]] converted to f32;
 * table {n_embd, n_rows} f32, f16, q8_0, q4_K or q6_K; ids I32 {n}; dst f32 {n_embd, n}. An id
 * outside [0, n_rows) writes zeros to its row (the device cannot report an error). */
vkrt_status vkrt_op_get_rows(const vkrt_tensor *dst, const vkrt_tensor *table,
                             const vkrt_tensor *ids);

/* KV-cache append (ggml SET_ROWS): dst[:, rows[i]] = src[:, i] converted to dst's type;
 * src f32 {n, count}; rows I32 {count}; dst f32, f16 or q8_0 {n, n_rows} (q8_0 rows are
 * quantized as ggml's quantize_row_q8_0: d = max|x| / 127, q = round(x / d)). A row index
 * outside [0, n_rows) is skipped. Indices must be distinct: two sources written to one row
 * leave that row unspecified (a q8_0 block may mix them). */
vkrt_status vkrt_op_set_rows(const vkrt_tensor *dst, const vkrt_tensor *src,
                             const vkrt_tensor *rows);
/* RoPE and KV-cache append in one dispatch (ggml's ROPE then SET_ROWS, fused): src f32
 * {head_dim, n_head, n} (token i's heads), each head turned as vkrt_op_rope_ext turns it at
 * position pos[i] (factors NULL or as there), then written as vkrt_op_set_rows writes row i
 * of a {head_dim * n_head, n} source: dst[:, rows[i]], dst f32, f16 or q8_0
 * {head_dim * n_head, n_rows}. rows, pos I32 {n}; dst disjoint from every source. One
 * dependent step instead of two: a layer's roped K goes into its cache while q is roped by
 * another dispatch beside it. */
vkrt_status vkrt_op_rope_set_rows(const vkrt_tensor *dst, const vkrt_tensor *src,
                                  const vkrt_tensor *rows, const vkrt_tensor *pos,
                                  const vkrt_tensor *factors, const vkrt_rope_params *params);

/* Decode attention over a KV cache (ggml FLASH_ATTN_EXT without mask beyond causality):
 * q f32 {head_dim, n_head, n_q}; k, v f16 or q8_0 {head_dim, n_head_kv, n_ctx} (row t of the
 * cache: token t, all KV heads; q8_0 needs head_dim a multiple of 32); kv_len I32 {n_q}:
 * query j attends to cache tokens [0, kv_len[j]) (causal decode: position + 1), read on the
 * device, clamped to [0, n_ctx]: 0 or less attends nothing (dst zeros), more than n_ctx the
 * whole cache. n_head a multiple of n_head_kv (grouped-query heads:
 * query head h uses KV head h / (n_head / n_head_kv)). dst f32 {head_dim, n_head, n_q} =
 * softmax(scale * q k^T) v per head; scale is usually 1 / sqrt(head_dim). Long contexts are
 * split across workgroups (partial max and sum per split, then a combine). With
 * VKRT_ACTIVATIONS_Q8 a q8_0 cache's scores may take scale * q rounded to 8 bits per 32
 * values (vkrt_quant_activations; vkrt-probe's attention line says when). */
vkrt_status vkrt_op_attention(const vkrt_tensor *dst, const vkrt_tensor *q, const vkrt_tensor *k,
                              const vkrt_tensor *v, const vkrt_tensor *kv_len, float scale);

/* dst I32 {rows}: for each row of x f32 {n, rows}, the index of its largest element (the
 * lowest index among equal ones; NaN never wins; 0 for a row of NaNs). */
vkrt_status vkrt_op_argmax(const vkrt_tensor *dst, const vkrt_tensor *x);

/* dst I32 {rows}: for each row of x f32 {n, rows}, an index drawn from softmax(x / temperature)
 * on the device, by the Gumbel-max trick: the index of the largest x_i / temperature + g_i,
 * g_i = -log(-log(u_i)), u_i uniform in (0, 1) from a hash of the row's key and i. key I32
 * {2, rows}: two words a row (k0, k1) that the caller writes before each draw (from its own
 * seeded generator; a captured graph reads them when launched); the same key and x draw the
 * same index. u_i = ((h >> 9) + 0.5) / 2^23 with h = mix(i + mix(k0 + mix(k1))) in 32-bit
 * unsigned arithmetic, mix(h) = lowbias32: h ^= h >> 16; h *= 0x7feb352d; h ^= h >> 15;
 * h *= 0x846ca68b; h ^= h >> 16 (-log(u_i) formed accurately near u_i = 1, where the draw's
 * winners are). NaN never wins, nor -inf while a finite x is in the row.
 * temperature finite and > 0 (0 is vkrt_op_argmax). Top-k and top-p are not applied. */
vkrt_status vkrt_op_sample(const vkrt_tensor *dst, const vkrt_tensor *x, const vkrt_tensor *key,
                           float temperature);

/* values f32 {k, rows}, ids I32 {k, rows}: for each row of x f32 {n, rows}, its k largest
 * elements, largest first, and their indices; among equal elements the lower index first.
 * NaN reads as -inf (its value comes out as -inf). 1 <= k <= 64 and k <= n; rows up to about
 * 500000 elements for k = 64 (a message says when a row is longer than the op takes). The
 * candidates of a top-k sampler: a host that finishes the draw (top-p, temperature) reads k
 * pairs instead of the whole row. */
vkrt_status vkrt_op_top_k(const vkrt_tensor *values, const vkrt_tensor *ids, const vkrt_tensor *x);

/* ---- collectives ---------------------------------------------------------------------- */

typedef enum vkrt_transport_kind {
  VKRT_TRANSPORT_NONE = 0,
  VKRT_TRANSPORT_NATIVE_FD,
  VKRT_TRANSPORT_CPU_PROXY,
  VKRT_TRANSPORT_HOST_STAGED,
} vkrt_transport_kind;

const char *vkrt_transport_str(vkrt_transport_kind kind);
/* The transport chosen at open (NONE when collectives are compiled out or one device). */
vkrt_transport_kind vkrt_transport(const vkrt_appliance *appliance);

/* Sum-allreduce of `count` elements: send[d] on device d, result into recv[d] on every
 * device (recv may equal send: in place). count 0 is a no-op returning VKRT_OK once the
 * arguments are valid (buffers, offsets, type). Recorded into every device's stream; work
 * recorded after it waits on the GPU where the transport allows. */
typedef struct vkrt_allreduce_args {
  vkrt_buffer *send[VKRT_MAX_DEVICES];
  uint64_t send_offset[VKRT_MAX_DEVICES];
  vkrt_buffer *recv[VKRT_MAX_DEVICES];
  uint64_t recv_offset[VKRT_MAX_DEVICES];
  uint64_t count;
  vkrt_type type;
} vkrt_allreduce_args;

vkrt_status vkrt_allreduce(vkrt_appliance *appliance, const vkrt_allreduce_args *args);

/* Hosts of a multi-host appliance (vkrt/vkrt_mpi.h): this host's rank and the host count
 * (0 and 1 for a one-host appliance). Every host has vkrt_device_count() devices and device
 * d of host h is global rank h * vkrt_device_count() + d; vkrt_allreduce sums over every
 * device of every host. */
uint32_t vkrt_host_rank(const vkrt_appliance *appliance);
uint32_t vkrt_host_count(const vkrt_appliance *appliance);

/* ---- captured graphs ---------------------------------------------------------------------
 * A fixed model records the same work every token. Capture it once and launch it per token:
 * a launch costs one vkQueueSubmit per device (graphs with collectives on native_fd or
 * cpu_proxy: handed to the device's submitter thread, which submits batch by batch), with the
 * timeline values it waits for and signals computed at launch, and reuses the command
 * buffers recorded at capture (no recording, no validation, no allocation per launch). The values that change per token
 * (position, token id, cache row, attended length) are read by the ops from device tensors
 * (the decode ops' I32 operands) that the caller updates between launches (vkrt_upload, or
 * captured copies and fills); nothing else may change.
 *
 * vkrt_graph_begin(app) starts capturing on every device of the appliance: from then until
 * vkrt_graph_end, the ops, vkrt_cmd_copy_buffer, vkrt_cmd_fill and vkrt_allreduce calls made
 * on the appliance are validated and recorded into the graph instead of the device streams;
 * nothing runs. Work recorded on a stream before begin is submitted by begin. While
 * capturing, vkrt_submit, vkrt_wait and vkrt_finish answer VKRT_ERROR_INVALID_ARGUMENT;
 * vkrt_upload / vkrt_download are not captured (they run at once, as always). A failing call
 * during capture returns its error as usual; vkrt_graph_end still makes a graph of what was
 * captured (an allreduce failing part way may have captured some of its pieces: capture
 * again). One capture at a time per appliance; capture from the
 * thread that records (recording rules of this header apply). An allreduce is captured on
 * the native_fd and cpu_proxy transports and on one device; host_staged reduces on the
 * caller's thread and answers VKRT_ERROR_UNSUPPORTED. A graph holds up to 128 submits and
 * 1024 buffers per device and 64 allreduce pieces; beyond, the call or vkrt_graph_end fails
 * with a message.
 *
 * vkrt_graph_launch runs the graph after everything recorded or launched before it on each
 * device (program order per device, the same as the recorded calls would have had), and the
 * results are bit-identical to recording the same calls directly. tickets (NULL, or an array
 * of vkrt_device_count() values) receive each device's ticket for vkrt_wait (0 for a device
 * the graph records nothing on); a later
 * vkrt_submit's ticket covers the launch too. A launch of a graph whose previous launch is
 * still running first waits for that one (bounded by the collective timeout:
 * VKRT_ERROR_TIMEOUT). A launch after a buffer the graph uses was destroyed fails with
 * VKRT_ERROR_INVALID_ARGUMENT and a message naming it, before anything is submitted.
 * Collective failures (a stalled peer) surface at vkrt_wait as for direct recording.
 * Devices without VK_KHR_push_descriptor cannot capture ops (VKRT_ERROR_UNAVAILABLE).
 *
 * vkrt_graph_destroy waits for the graph's launches to finish, then frees it (NULL: no-op);
 * destroy every graph before vkrt_close. */
typedef struct vkrt_graph vkrt_graph;

vkrt_status vkrt_graph_begin(vkrt_appliance *appliance);
/* Ends the capture begun on appliance; *out is NULL on failure (the capture ends anyway). */
vkrt_status vkrt_graph_end(vkrt_appliance *appliance, vkrt_graph **out);
vkrt_status vkrt_graph_launch(vkrt_graph *graph, uint64_t *tickets);
void vkrt_graph_destroy(vkrt_graph *graph);

/* ---- plan and description (vkrt-probe) ------------------------------------------------- */

/* Writes the NCCL-style plan lines ("vkrt: dev0 -> dev1 via cpu_proxy: ...") or, with json,
 * one JSON object describing board, devices, capabilities and plans, into buf. Returns the
 * length needed (excluding NUL) like snprintf. */
size_t vkrt_describe(const vkrt_appliance *appliance, bool json, char *buf, size_t buf_size);

#ifdef __cplusplus
}
#endif
