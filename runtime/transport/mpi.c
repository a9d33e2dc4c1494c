/* mpi: the inter-host step of a multi-host appliance (one MPI rank per host).
 *
 * Hierarchy. Within a host the host transport (cpu_proxy: host slots imported into every
 * device; host_staged: host-visible staging) brings every device's contribution of a piece
 * into host memory, as it does on one host. Instead of its CPU reduce it calls
 * vkrt_interhost_allreduce, which
 *   1. sums the host's devices in device order into an f32 partial (f16 accumulates in f32),
 *   2. exchanges the partials: every host sends its partial to every other host
 *      (MPI_Isend/MPI_Irecv on a duplicate of the application's communicator),
 *   3. sums the H partials in host order 0..H-1 in f32 and writes dst (the transport's
 *      result slot, which every device of the host then copies out).
 *
 * Why an allgather and an ordered sum rather than MPI_Allreduce: MPI does not promise that a
 * floating-point reduction gives every rank the same bits (the algorithm, and so the
 * association, depends on the message size, the rank and the tuning). Here every host adds
 * the same H partials (the bytes that travelled) in the same order, so every rank of every
 * host gets the same bits without a broadcast round, and the result does not depend on
 * which host did the arithmetic. The cost is (H - 1) partials received per host instead of
 * 2 (H - 1) / H of a ring: right for appliances of a few hosts. (For many hosts the same
 * property holds for reduce-scatter by ownership + allgather, two exchanges.)
 *
 * Why point-to-point requests rather than MPI_Iallgather: a stalled host must be detected
 * and named. MPI_Test on one request per (host, chunk) says exactly which host has not
 * delivered, and a pending receive can be cancelled after the timeout, so nothing stays
 * posted; a non-blocking collective can be neither attributed nor cancelled.
 *
 * Pipelining. A piece is cut into chunks of CHUNK_ELEMS f32 partials with WINDOW chunks in
 * flight: the local sum of chunk c + 1 runs while chunk c travels, and the final sum of
 * chunk c while later chunks travel. Across pieces the host transport already overlaps: the
 * devices copy piece k + 1 into the other slot set while this step runs for piece k.
 *
 * Failures. The duplicate communicator has MPI_ERRORS_RETURN, so an MPI error is a status
 * with MPI's message. Every wait is MPI_Test against the collective timeout, restarted when
 * a chunk completes; on expiry the pending requests are cancelled (receives) or released
 * (sends), the status becomes sticky and names the host(s) that did not deliver. The caller
 * (the proxy thread, or host_staged on the caller's thread) still signals its devices, so
 * nothing waits forever. */
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "base/numbers.h"
#include "transport/transport.h"

#define CHUNK_ELEMS (64u * 1024u) /* f32 partials per message: 256 KiB */
#define WINDOW 4                  /* chunks in flight */
#define TAG_SPACE 32768u          /* MPI guarantees tags 0..32767 */
#define CANCEL_WAIT_NS 100000000ull /* how long a cancelled request may take to complete */
#define JOIN_MIN_NS 120000000000ull /* vkrt_open waits at least 2 min for the other hosts: they
                                    * open their devices at their own pace (seconds on a loaded
                                    * lavapipe host), which is not a stall of a collective */
#define MAX_HOSTS 64              /* host sums added per element (a stack array) */
#define POLL_YIELD_NS 2000000ull  /* after progress: yield between tests for 2 ms, then sleep */

struct vkrt_interhost {
  struct vkrt_base *base;
  MPI_Comm comm;              /* duplicate of the application's; MPI_COMM_NULL until joined */
  uint32_t rank, hosts, devices;
  uint64_t timeout_ns;
  uint64_t piece_bytes;
  bool stall;                 /* injected VKRT_FAULT_HOST_STALL: never send */
  float *partial;             /* [WINDOW][CHUNK_ELEMS]: this host's sums */
  float *recv;                /* [hosts][WINDOW][CHUNK_ELEMS]: the other hosts' sums */
  MPI_Request *req;           /* [WINDOW][hosts][2]: receive from / send to each host */
  uint64_t tag;               /* next chunk's tag (mod TAG_SPACE) */
  vkrt_status status;         /* sticky */
  char message[VKRT_ERROR_MESSAGE_SIZE];
  bool abandoned;             /* a request was released while pending: keep its buffers */
  uint64_t pieces, bytes, exchange_ns; /* statistics */
};

static MPI_Request *req_at(struct vkrt_interhost *ih, uint32_t slot, uint32_t host, int dir) {
  return &ih->req[((size_t)slot * ih->hosts + host) * 2 + (size_t)dir];
}

static void mpi_message(int rc, char *buf, size_t size) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
    len = snprintf(text, sizeof(text), "MPI error %d", rc);
  vkrt_format(buf, size, "%.*s", len, text);
}

/* Polls without taking the cores a CPU device (lavapipe) or the peer needs: yields right
 * after progress, sleeps 50 us once nothing moved for a while. */
static void poll_pause(uint64_t since_progress_ns) {
  if (since_progress_ns < POLL_YIELD_NS) {
    sched_yield();
    return;
  }
  struct timespec ts = {0, 50000};
  nanosleep(&ts, NULL);
}

/* Waits for one request (open-time collectives) until the deadline. */
static int wait_request(MPI_Request *r, uint64_t timeout_ns, bool *timed_out) {
  uint64_t start = vkrt_now_ns();
  *timed_out = false;
  for (;;) {
    int flag = 0;
    int rc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || flag)
      return rc;
    uint64_t now = vkrt_now_ns();
    if (now - start >= timeout_ns) {
      *timed_out = true;
      return MPI_SUCCESS;
    }
    poll_pause(now - start);
  }
}

vkrt_status vkrt_interhost_create(struct vkrt_system *sys, uint64_t piece_bytes,
                                  uint64_t timeout_ns, struct vkrt_interhost **out) {
  struct vkrt_base *base = &sys->base;
  *out = NULL;
  int initialized = 0, finalized = 0, level = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "mpi: MPI is %s; the application calls MPI_Init_thread(..., "
                      "MPI_THREAD_MULTIPLE, ...) before vkrt_open and MPI_Finalize after "
                      "vkrt_close", finalized ? "already finalized" : "not initialized");
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "mpi: MPI runs at thread level %d; libvkrt calls MPI from its collective "
                      "thread and needs MPI_THREAD_MULTIPLE (%d) from MPI_Init_thread", level,
                      MPI_THREAD_MULTIPLE);
  MPI_Comm user = MPI_Comm_f2c((MPI_Fint)sys->options.mpi_comm);
  if (user == MPI_COMM_NULL)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "mpi: the communicator is MPI_COMM_NULL");

  struct vkrt_interhost *ih = vkrt_calloc(base, 1, sizeof(*ih));
  if (!ih)
    return vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "mpi: out of host memory");
  ih->base = base;
  ih->comm = MPI_COMM_NULL;
  ih->devices = sys->device_count;
  ih->timeout_ns = timeout_ns;
  ih->piece_bytes = piece_bytes;
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  ih->stall = (sys->options.faults.mask & VKRT_FAULT_HOST_STALL) != 0;
#endif

  /* Join: duplicate the communicator (collective) without blocking past the join budget. */
  uint64_t join_ns = VKRT_MAX(timeout_ns, JOIN_MIN_NS);
  vkrt_status s = VKRT_OK;
  MPI_Request r = MPI_REQUEST_NULL;
  bool timed_out = false;
  MPI_Comm dup = MPI_COMM_NULL;
  int rc = MPI_Comm_idup(user, &dup, &r);
  if (rc == MPI_SUCCESS)
    rc = wait_request(&r, join_ns, &timed_out);
  if (rc != MPI_SUCCESS || timed_out) {
    char why[256];
    if (timed_out) /* an active collective request cannot be cancelled or freed: left */
      vkrt_format(why, sizeof(why), "not every host joined within %llu ms",
                  (unsigned long long)(join_ns / 1000000));
    else
      mpi_message(rc, why, sizeof(why));
    vkrt_free(base, ih);
    return vkrt_error(base, timed_out ? VKRT_ERROR_TIMEOUT : VKRT_ERROR_INTERNAL,
                      "mpi: MPI_Comm_idup at vkrt_open: %s", why);
  }
  ih->comm = dup;
  MPI_Comm_set_errhandler(ih->comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(ih->comm, &rank);
  MPI_Comm_size(ih->comm, &size);
  ih->rank = (uint32_t)rank;
  ih->hosts = (uint32_t)size;
  if (size > MAX_HOSTS)
    s = vkrt_error(base, VKRT_ERROR_UNSUPPORTED, "mpi: %d hosts; this build adds at most %d",
                   size, MAX_HOSTS);

  /* Every host must cut allreduces the same way: same device count and piece size. */
  int64_t mine[2] = {(int64_t)sys->device_count, (int64_t)piece_bytes};
  int64_t *all = s == VKRT_OK ? vkrt_calloc(base, (size_t)size * 2, sizeof(int64_t)) : NULL;
  if (s == VKRT_OK && !all)
    s = vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "mpi: out of host memory");
  if (s == VKRT_OK) {
    rc = MPI_Iallgather(mine, 2, MPI_INT64_T, all, 2, MPI_INT64_T, ih->comm, &r);
    if (rc == MPI_SUCCESS)
      rc = wait_request(&r, join_ns, &timed_out);
    if (rc != MPI_SUCCESS || timed_out) {
      char why[256];
      if (timed_out)
        vkrt_format(why, sizeof(why), "not every host answered within %llu ms",
                    (unsigned long long)(join_ns / 1000000));
      else
        mpi_message(rc, why, sizeof(why));
      s = vkrt_error(base, timed_out ? VKRT_ERROR_TIMEOUT : VKRT_ERROR_INTERNAL,
                     "mpi: exchanging the host shapes at vkrt_open: %s", why);
      if (timed_out) { /* the request still writes `all`: leave it allocated */
        all = NULL;
        ih->abandoned = true;
      }
    }
  }
  for (int h = 0; s == VKRT_OK && h < size; h++) {
    if (all[2 * h] != mine[0])
      s = vkrt_error(base, VKRT_ERROR_BOARD_MISMATCH,
                     "mpi: host%d has %lld devices, host%d has %lld; every host of the appliance "
                     "must open the same board", h, (long long)all[2 * h], rank,
                     (long long)mine[0]);
    else if (all[2 * h + 1] != mine[1])
      s = vkrt_error(base, VKRT_ERROR_BOARD_MISMATCH,
                     "mpi: host%d cuts allreduces into pieces of %lld bytes, host%d into %lld "
                     "(different slot size or intra-host transport); every host must match", h,
                     (long long)all[2 * h + 1], rank, (long long)mine[1]);
  }
  vkrt_free(base, all);

  if (s == VKRT_OK) {
    size_t chunk_bytes = (size_t)CHUNK_ELEMS * sizeof(float);
    ih->partial = vkrt_alloc_aligned(base, WINDOW * chunk_bytes, 64);
    ih->recv = vkrt_alloc_aligned(base, (size_t)ih->hosts * WINDOW * chunk_bytes, 64);
    ih->req = vkrt_calloc(base, (size_t)WINDOW * ih->hosts * 2, sizeof(MPI_Request));
    if (!ih->partial || !ih->recv || !ih->req)
      s = vkrt_error(base, VKRT_ERROR_OUT_OF_HOST_MEMORY, "mpi: out of host memory for %u hosts",
                     ih->hosts);
    else
      for (size_t i = 0; i < (size_t)WINDOW * ih->hosts * 2; i++)
        ih->req[i] = MPI_REQUEST_NULL;
  }
  if (s != VKRT_OK) {
    vkrt_interhost_destroy(ih);
    return s;
  }
  vkrt_log(base, VKRT_LOG_INFO,
           "mpi: host%u of %u joined (%u devices per host, global ranks %u..%u)%s", ih->rank,
           ih->hosts, ih->devices, ih->rank * ih->devices, ih->rank * ih->devices + ih->devices - 1,
           ih->stall ? "; injected stall: this host never sends" : "");
  *out = ih;
  return VKRT_OK;
}

void vkrt_interhost_destroy(struct vkrt_interhost *ih) {
  if (!ih)
    return;
  struct vkrt_base *base = ih->base;
  if (ih->pieces)
    vkrt_log(base, VKRT_LOG_DEBUG, "mpi: %llu pieces, %llu bytes, %.3f ms in the exchange",
             (unsigned long long)ih->pieces, (unsigned long long)ih->bytes,
             (double)ih->exchange_ns * 1e-6);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (ih->comm != MPI_COMM_NULL && !finalized)
    MPI_Comm_free(&ih->comm);
  if (ih->abandoned) {
    /* MPI may still write into (or read from) these buffers: leaking them is the only safe
     * choice; it happens only after a host failed. */
    vkrt_log(base, VKRT_LOG_WARN, "mpi: requests to a failed host were released while pending; "
             "their buffers are left allocated");
  } else {
    vkrt_free(base, ih->partial);
    vkrt_free(base, ih->recv);
    vkrt_free(base, ih->req);
  }
  vkrt_free(base, ih);
}

void vkrt_interhost_hosts(const struct vkrt_interhost *ih, uint32_t *rank, uint32_t *count) {
  *rank = ih ? ih->rank : 0;
  *count = ih ? ih->hosts : 1;
}

/* ---- the arithmetic ----------------------------------------------------------------------- */

/* dst[j] = ((src0[j] + src1[j]) + ...) in f32, j in [first, first + len). */
static void local_sum(vkrt_type type, float *dst, const void *const *src, uint32_t n,
                      uint64_t first, size_t len) {
  if (type == VKRT_TYPE_F32) {
    memcpy(dst, (const float *)src[0] + first, len * sizeof(float));
    for (uint32_t r = 1; r < n; r++) {
      const float *s = (const float *)src[r] + first;
      for (size_t j = 0; j < len; j++)
        dst[j] += s[j];
    }
  } else {
    const uint16_t *s0 = (const uint16_t *)src[0] + first;
    for (size_t j = 0; j < len; j++)
      dst[j] = vkrt_f16_to_f32(s0[j]);
    for (uint32_t r = 1; r < n; r++) {
      const uint16_t *s = (const uint16_t *)src[r] + first;
      for (size_t j = 0; j < len; j++)
        dst[j] += vkrt_f16_to_f32(s[j]);
    }
  }
}

/* dst[first + j] = ((part0[j] + part1[j]) + ...) in f32, converted once to type. Every input
 * is read before dst is written, block by block, so dst may alias a host's source. */
static void host_sum(vkrt_type type, void *dst, const float *const *part, uint32_t hosts,
                     uint64_t first, size_t len) {
  float acc[2048];
  for (size_t b = 0; b < len; b += 2048) {
    size_t m = VKRT_MIN((size_t)2048, len - b);
    memcpy(acc, part[0] + b, m * sizeof(float));
    for (uint32_t h = 1; h < hosts; h++)
      for (size_t j = 0; j < m; j++)
        acc[j] += part[h][b + j];
    if (type == VKRT_TYPE_F32) {
      memcpy((float *)dst + first + b, acc, m * sizeof(float));
    } else {
      uint16_t *d = (uint16_t *)dst + first + b;
      for (size_t j = 0; j < m; j++)
        d[j] = vkrt_f32_to_f16(acc[j]);
    }
  }
}

/* ---- the exchange ------------------------------------------------------------------------- */

static vkrt_status fail(struct vkrt_interhost *ih, vkrt_status s, char *message, size_t size,
                        const char *fmt, ...) VKRT_PRINTF(5, 6);
static vkrt_status fail(struct vkrt_interhost *ih, vkrt_status s, char *message, size_t size,
                        const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ih->message, sizeof(ih->message), fmt, ap);
  va_end(ap);
  ih->status = s;
  vkrt_format(message, size, "%s", ih->message);
  return s;
}

/* After a failure: nothing may stay posted. Receives are cancelled (a cancelled receive
 * completes at once unless it already matched); sends that do not complete within
 * CANCEL_WAIT_NS are released, and their buffers kept. */
static void drop_requests(struct vkrt_interhost *ih) {
  size_t total = (size_t)WINDOW * ih->hosts * 2;
  for (size_t i = 0; i < total; i++)
    if (ih->req[i] != MPI_REQUEST_NULL && (i & 1) == 0)
      MPI_Cancel(&ih->req[i]);
  uint64_t start = vkrt_now_ns();
  for (size_t i = 0; i < total; i++) {
    while (ih->req[i] != MPI_REQUEST_NULL) {
      int flag = 0;
      if (MPI_Test(&ih->req[i], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag) {
        ih->req[i] = MPI_REQUEST_NULL;
        break;
      }
      if (vkrt_now_ns() - start > CANCEL_WAIT_NS) {
        MPI_Request_free(&ih->req[i]);
        ih->req[i] = MPI_REQUEST_NULL;
        ih->abandoned = true;
        break;
      }
      sched_yield();
    }
  }
}

/* Local sum of chunk c, then its receives and sends. */
static int post_chunk(struct vkrt_interhost *ih, vkrt_type type, const void *const *src,
                      uint32_t n, uint64_t count, uint64_t c, int tag, uint32_t *bad_host) {
  uint32_t slot = (uint32_t)(c % WINDOW);
  uint64_t first = c * CHUNK_ELEMS;
  int len = (int)VKRT_MIN((uint64_t)CHUNK_ELEMS, count - first);
  float *mine = ih->partial + (size_t)slot * CHUNK_ELEMS;
  local_sum(type, mine, src, n, first, (size_t)len);
  for (uint32_t h = 0; h < ih->hosts; h++) {
    if (h == ih->rank)
      continue;
    float *from = ih->recv + ((size_t)h * WINDOW + slot) * CHUNK_ELEMS;
    *bad_host = h;
    int rc = MPI_Irecv(from, len, MPI_FLOAT, (int)h, tag, ih->comm, req_at(ih, slot, h, 0));
    if (rc != MPI_SUCCESS)
      return rc;
    if (ih->stall)
      continue;
    rc = MPI_Isend(mine, len, MPI_FLOAT, (int)h, tag, ih->comm, req_at(ih, slot, h, 1));
    if (rc != MPI_SUCCESS)
      return rc;
  }
  return MPI_SUCCESS;
}

/* Tests chunk slot's requests; *done when all completed. On an MPI error names the host. */
static int test_chunk(struct vkrt_interhost *ih, uint32_t slot, bool *done, uint32_t *bad_host) {
  *done = true;
  for (uint32_t h = 0; h < ih->hosts; h++)
    for (int dir = 0; dir < 2; dir++) {
      MPI_Request *r = req_at(ih, slot, h, dir);
      if (*r == MPI_REQUEST_NULL)
        continue;
      int flag = 0;
      MPI_Status st;
      int rc = MPI_Test(r, &flag, &st);
      if (rc != MPI_SUCCESS) {
        *bad_host = h;
        return rc;
      }
      if (!flag)
        *done = false;
    }
  return MPI_SUCCESS;
}

vkrt_status vkrt_interhost_allreduce(struct vkrt_interhost *ih, vkrt_type type, void *dst,
                                     const void *const *src, uint32_t n, uint64_t count,
                                     char *message, size_t size) {
  if (ih->status != VKRT_OK) {
    vkrt_format(message, size, "%s", ih->message);
    return ih->status;
  }
  uint64_t chunks = (count + CHUNK_ELEMS - 1) / CHUNK_ELEMS;
  uint64_t tag0 = ih->tag, posted = 0, done = 0;
  ih->tag = (ih->tag + chunks) % TAG_SPACE;
  uint64_t start = vkrt_now_ns(), progress = start;
  const float *part[MAX_HOSTS];
  while (done < chunks) {
    uint32_t bad = 0;
    if (posted < chunks && posted - done < WINDOW) {
      int rc = post_chunk(ih, type, src, n, count, posted, (int)((tag0 + posted) % TAG_SPACE),
                          &bad);
      if (rc != MPI_SUCCESS) {
        char why[256];
        mpi_message(rc, why, sizeof(why));
        drop_requests(ih);
        return fail(ih, VKRT_ERROR_INTERNAL, message, size,
                    "mpi: posting chunk %llu for host%u failed: %s; every rank's result is "
                    "invalid", (unsigned long long)posted, bad, why);
      }
      posted++;
      continue;
    }
    uint32_t slot = (uint32_t)(done % WINDOW);
    bool complete = false;
    int rc = test_chunk(ih, slot, &complete, &bad);
    if (rc != MPI_SUCCESS) {
      char why[256];
      mpi_message(rc, why, sizeof(why));
      drop_requests(ih);
      return fail(ih, VKRT_ERROR_INTERNAL, message, size,
                  "mpi: exchange with host%u failed: %s (a host died, or the hosts called "
                  "vkrt_allreduce with different counts); every rank's result is invalid", bad,
                  why);
    }
    uint64_t now = vkrt_now_ns();
    if (complete && !ih->stall) {
      uint64_t first = done * CHUNK_ELEMS;
      size_t len = (size_t)VKRT_MIN((uint64_t)CHUNK_ELEMS, count - first);
      for (uint32_t h = 0; h < ih->hosts; h++)
        part[h] = h == ih->rank ? ih->partial + (size_t)slot * CHUNK_ELEMS
                                : ih->recv + ((size_t)h * WINDOW + slot) * CHUNK_ELEMS;
      host_sum(type, dst, part, ih->hosts, first, len);
      done++;
      progress = vkrt_now_ns();
      continue;
    }
    if (now - progress >= ih->timeout_ns) {
      char who[128] = "";
      size_t at = 0;
      for (uint32_t h = 0; h < ih->hosts; h++) {
        MPI_Request *r = req_at(ih, slot, h, 0);
        int flag = 1;
        if (*r != MPI_REQUEST_NULL)
          MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        if (!flag && at < sizeof(who))
          at += (size_t)snprintf(who + at, sizeof(who) - at, "%shost%u", at ? ", " : "", h);
      }
      drop_requests(ih);
      if (ih->stall)
        return fail(ih, VKRT_ERROR_TIMEOUT, message, size,
                    "mpi: host%u (this host) stalled: it withheld its contribution to chunk %llu "
                    "of %llu (injected VKRT_FAULT_HOST_STALL) and gave up after %llu ms; every "
                    "rank's result is invalid", ih->rank, (unsigned long long)done,
                    (unsigned long long)chunks, (unsigned long long)(ih->timeout_ns / 1000000));
      return fail(ih, VKRT_ERROR_TIMEOUT, message, size,
                  "mpi: %s sent nothing for %llu ms (stalled or dead host; chunk %llu of %llu "
                  "of this piece); every rank's result is invalid",
                  at ? who : "a host", (unsigned long long)(ih->timeout_ns / 1000000),
                  (unsigned long long)done, (unsigned long long)chunks);
    }
    poll_pause(now - progress);
  }
  ih->pieces++;
  ih->bytes += count * (type == VKRT_TYPE_F32 ? 4 : 2);
  ih->exchange_ns += vkrt_now_ns() - start;
  return VKRT_OK;
}

/* ---- description -------------------------------------------------------------------------- */

size_t vkrt_interhost_describe(const struct vkrt_interhost *ih, const char *intra, bool json,
                               char *buf, size_t size) {
  struct vkrt_text o = {buf, size, 0};
  if (size)
    buf[0] = '\0';
  if (json) {
    vkrt_text_put(&o, ", \"hosts\": {\"count\": %u, \"rank\": %u, \"devices_per_host\": %u, "
                  "\"inter_host\": \"mpi\", \"intra_host\": \"%s\", \"exchange\": "
                  "\"MPI_Isend/MPI_Irecv allgather of host sums, f32 sum in host order\", "
                  "\"chunk_bytes\": %u, \"chunks_in_flight\": %d, \"stall_injected\": %s}",
                  ih->hosts, ih->rank, ih->devices, intra, CHUNK_ELEMS * 4u, WINDOW,
                  ih->stall ? "true" : "false");
    return o.len;
  }
  vkrt_text_put(&o, "vkrt: hosts: %u over MPI, this is host%u; %u devices per host; global rank "
                "= host x %u + device\n", ih->hosts, ih->rank, ih->devices, ih->devices);
  for (uint32_t d = 0; d + 1 < ih->devices; d++)
    vkrt_text_put(&o, "vkrt: host%u/dev%u -> host%u/dev%u via %s (the host sum lands in host "
                  "memory)\n", ih->rank, d, ih->rank, d + 1, intra);
  for (uint32_t d = 0; d < ih->devices; d++)
    for (uint32_t h = 0; h < ih->hosts; h++)
      if (h != ih->rank)
        vkrt_text_put(&o, "vkrt: host%u/dev%u -> host%u via mpi (MPI_Isend/MPI_Irecv allgather "
                      "of host sums in %u KiB chunks, %d in flight; f32 sum in host order, "
                      "bit-identical on every rank)\n", ih->rank, d, h, CHUNK_ELEMS * 4u / 1024u,
                      WINDOW);
  return o.len;
}
