/* Copy pool: helper threads that split one large memcpy (a staging slot) into blocks. A
 * single thread's pageable memcpy tops out near 4.7 GB/s on the H200 host, a tenth of
 * what the DMA moves, so the staging ring needs several threads to keep the DMA fed. */
#include <string.h>

#include "import/import.h"

#define POOL_MIN_SIZE (1ull << 20)   /* below this one thread is as fast */
#define POOL_MIN_BLOCK (256ull << 10)

static void copy_some(struct vkrt_copy_pool *pool) {
  const uint64_t blocks = (pool->size + pool->block - 1) / pool->block;
  for (;;) {
    uint64_t b = atomic_fetch_add(&pool->next_block, 1);
    if (b >= blocks)
      return;
    uint64_t off = b * pool->block;
    uint64_t n = pool->size - off < pool->block ? pool->size - off : pool->block;
    memcpy(pool->dst + off, pool->src + off, n);
  }
}

static void *helper_main(void *arg) {
  struct vkrt_copy_pool *pool = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    while (!pool->quit && pool->generation == seen)
      pthread_cond_wait(&pool->work_cond, &pool->lock);
    if (pool->quit)
      break;
    seen = pool->generation;
    pthread_mutex_unlock(&pool->lock);
    copy_some(pool);
    pthread_mutex_lock(&pool->lock);
    if (--pool->pending == 0)
      pthread_cond_signal(&pool->done_cond);
  }
  pthread_mutex_unlock(&pool->lock);
  return NULL;
}

void vkrt_copy_pool_init(struct vkrt_copy_pool *pool, uint32_t threads) {
  memset(pool, 0, sizeof(*pool));
  pthread_mutex_init(&pool->owner, NULL);
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->work_cond, NULL);
  pthread_cond_init(&pool->done_cond, NULL);
  atomic_init(&pool->next_block, 0);
  if (threads > 64)
    threads = 64;
  for (uint32_t i = 0; i < threads; i++) {
    if (pthread_create(&pool->tid[i], NULL, helper_main, pool) != 0)
      break; /* fewer helpers: copies still complete, just slower */
    pool->threads++;
  }
}

void vkrt_copy_pool_finish(struct vkrt_copy_pool *pool) {
  pthread_mutex_lock(&pool->lock);
  pool->quit = true;
  pthread_cond_broadcast(&pool->work_cond);
  pthread_mutex_unlock(&pool->lock);
  for (uint32_t i = 0; i < pool->threads; i++)
    pthread_join(pool->tid[i], NULL);
  pthread_cond_destroy(&pool->work_cond);
  pthread_cond_destroy(&pool->done_cond);
  pthread_mutex_destroy(&pool->lock);
  pthread_mutex_destroy(&pool->owner);
  pool->threads = 0;
}

void vkrt_copy_pool_memcpy(struct vkrt_copy_pool *pool, void *dst, const void *src,
                           uint64_t size) {
  if (!pool || pool->threads == 0 || size < POOL_MIN_SIZE ||
      pthread_mutex_trylock(&pool->owner) != 0) {
    memcpy(dst, src, size);
    return;
  }
  uint64_t block = size / (pool->threads + 1);
  block = (block + 4095) & ~4095ull;
  if (block < POOL_MIN_BLOCK)
    block = POOL_MIN_BLOCK;
  pthread_mutex_lock(&pool->lock);
  pool->dst = dst;
  pool->src = src;
  pool->size = size;
  pool->block = block;
  atomic_store(&pool->next_block, 0);
  pool->pending = pool->threads;
  pool->generation++;
  pthread_cond_broadcast(&pool->work_cond);
  pthread_mutex_unlock(&pool->lock);
  copy_some(pool);
  pthread_mutex_lock(&pool->lock);
  while (pool->pending)
    pthread_cond_wait(&pool->done_cond, &pool->lock);
  pthread_mutex_unlock(&pool->lock);
  pthread_mutex_unlock(&pool->owner);
}
