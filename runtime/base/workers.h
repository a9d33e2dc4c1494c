/* One worker pool for every CPU-parallel loop in libvkrt (staging-slot memcpys, the
 * pre-stage copy, the transports' CPU reduce): helper threads started once, woken per job,
 * the calling thread taking part 0. Nothing allocates: the pool is embedded where it is
 * used, and a job lives on the caller's stack. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define VKRT_WORKERS_MAX 64 /* helper threads at most */

/* Runs part `part` of `parts` of a job (part 0 on the calling thread). */
typedef void (*vkrt_work_fn)(void *job, uint32_t part, uint32_t parts);

struct vkrt_workers;
struct vkrt_worker_slot {
  struct vkrt_workers *pool;
  uint32_t part;
};

struct vkrt_workers {
  pthread_mutex_t owner;   /* held by the thread whose job runs: one job at a time */
  pthread_mutex_t lock;
  pthread_cond_t work_cond, done_cond;
  uint32_t helpers;        /* helper threads started */
  pthread_t tid[VKRT_WORKERS_MAX];
  struct vkrt_worker_slot slot[VKRT_WORKERS_MAX];
  uint64_t generation;     /* bumped per job */
  uint32_t pending;        /* helpers still working on the current job */
  bool quit;
  vkrt_work_fn fn;
  void *job;
};

/* Starts up to `helpers` threads named `name` (at most 15 characters). Fewer start when
 * pthread_create fails; jobs still complete, with fewer parts. */
void vkrt_workers_init(struct vkrt_workers *w, uint32_t helpers, const char *name);
/* Stops and joins the helpers. */
void vkrt_workers_finish(struct vkrt_workers *w);
/* Parts a job is split into: the helpers plus the caller. */
static inline uint32_t vkrt_workers_parts(const struct vkrt_workers *w) { return w->helpers + 1; }
/* Runs fn(job, part, parts) for every part and returns when all are done; waits while
 * another thread's job holds the pool. */
void vkrt_workers_run(struct vkrt_workers *w, vkrt_work_fn fn, void *job);
/* The same when the pool is free; false (nothing run) when another job holds it, so the
 * caller can do the work alone rather than queue. */
bool vkrt_workers_try_run(struct vkrt_workers *w, vkrt_work_fn fn, void *job);
