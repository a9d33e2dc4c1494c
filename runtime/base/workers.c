/* The worker pool (workers.h): one generation counter wakes the helpers, a pending count
 * tells the caller when the last one is done. */
#include <string.h>

#include "base/base.h"
#include "base/workers.h"

static void *helper_main(void *arg) {
  struct vkrt_worker_slot *slot = arg;
  struct vkrt_workers *w = slot->pool;
  uint64_t seen = 0;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (!w->quit && w->generation == seen)
      pthread_cond_wait(&w->work_cond, &w->lock);
    if (w->quit)
      break;
    seen = w->generation;
    vkrt_work_fn fn = w->fn;
    void *job = w->job;
    uint32_t parts = w->helpers + 1;
    pthread_mutex_unlock(&w->lock);
    fn(job, slot->part, parts);
    pthread_mutex_lock(&w->lock);
    if (--w->pending == 0)
      pthread_cond_signal(&w->done_cond);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

void vkrt_workers_init(struct vkrt_workers *w, uint32_t helpers, const char *name) {
  memset(w, 0, sizeof(*w));
  pthread_mutex_init(&w->owner, NULL);
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->work_cond, NULL);
  pthread_cond_init(&w->done_cond, NULL);
  helpers = VKRT_MIN(helpers, (uint32_t)VKRT_WORKERS_MAX);
  /* Started under the lock so no helper reads `helpers` while it still grows. */
  pthread_mutex_lock(&w->lock);
  for (uint32_t i = 0; i < helpers; i++) {
    w->slot[i] = (struct vkrt_worker_slot){w, i + 1};
    if (pthread_create(&w->tid[i], NULL, helper_main, &w->slot[i]) != 0)
      break;
    if (name)
      pthread_setname_np(w->tid[i], name);
    w->helpers++;
  }
  pthread_mutex_unlock(&w->lock);
}

void vkrt_workers_finish(struct vkrt_workers *w) {
  pthread_mutex_lock(&w->lock);
  w->quit = true;
  pthread_cond_broadcast(&w->work_cond);
  pthread_mutex_unlock(&w->lock);
  for (uint32_t i = 0; i < w->helpers; i++)
    pthread_join(w->tid[i], NULL);
  pthread_cond_destroy(&w->work_cond);
  pthread_cond_destroy(&w->done_cond);
  pthread_mutex_destroy(&w->lock);
  pthread_mutex_destroy(&w->owner);
  w->helpers = 0;
}

/* The caller holds w->owner. */
static void run_owned(struct vkrt_workers *w, vkrt_work_fn fn, void *job) {
  const uint32_t parts = w->helpers + 1;
  if (w->helpers) {
    pthread_mutex_lock(&w->lock);
    w->fn = fn;
    w->job = job;
    w->pending = w->helpers;
    w->generation++;
    pthread_cond_broadcast(&w->work_cond);
    pthread_mutex_unlock(&w->lock);
  }
  fn(job, 0, parts);
  if (w->helpers) {
    pthread_mutex_lock(&w->lock);
    while (w->pending)
      pthread_cond_wait(&w->done_cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
  }
  pthread_mutex_unlock(&w->owner);
}

void vkrt_workers_run(struct vkrt_workers *w, vkrt_work_fn fn, void *job) {
  pthread_mutex_lock(&w->owner);
  run_owned(w, fn, job);
}

bool vkrt_workers_try_run(struct vkrt_workers *w, vkrt_work_fn fn, void *job) {
  if (pthread_mutex_trylock(&w->owner) != 0)
    return false;
  run_owned(w, fn, job);
  return true;
}
