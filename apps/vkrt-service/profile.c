/* vkrt-service --profile: where a token's GPU time goes. One more token at the last fed
 * position (it writes the K/V rows that position already holds) is recorded directly, with
 * the lab's GPU timers around each op on device 0 and a full barrier after each, so each op's
 * time is its own; the ops are then summed by name. The same token without timers is timed
 * first, so the barriers' cost shows as the difference.
 * --time-without: the other way round, ops left out of the records, so the run's own timings
 * (the captured token, barriers and all) say what they cost. */
#include <stdlib.h>
#include <string.h>

#include "service.h"
#include "vkrt/kconfig.h" /* IS_ENABLED, CONFIG_VKRT_LAB */

/* Whether what begins with one of the comma-separated prefixes of --time-without. */
static bool left_out(void *user, uint32_t device, const char *what) {
  struct service *s = user;
  for (const char *p = s->args->time_without; *p;) {
    size_t n = strcspn(p, ",");
    if (n && !strncmp(what, p, n)) {
      s->left_out += device == 0 || device == UINT32_MAX;
      return true;
    }
    p += n + (p[n] == ',');
  }
  return false;
}

void model_time_without(struct service *s) {
  if (!s->args->time_without)
    return;
  printf("vkrt-service: --time-without %s: the ops whose names begin so are left out of every "
         "record: the times below are the run's without them, the tokens are wrong\n",
         s->args->time_without);
  llama_gpu_set_hooks(s->gpu, &(struct llama_gpu_hooks){.user = s, .skip = left_out});
}

void model_time_without_report(const struct service *s) {
  if (s->args->time_without)
    printf("vkrt-service: --time-without %s: %llu records of device 0's ops left out\n",
           s->args->time_without, (unsigned long long)s->left_out);
}
#if IS_ENABLED(CONFIG_VKRT_LAB)
#include "vkrt/vkrt_lab.h"

#define PROFILE_MAX_OPS 8192

struct profile {
  vkrt_appliance *app;
  vkrt_lab_timer *timer[PROFILE_MAX_OPS];
  const char *what[PROFILE_MAX_OPS];
  uint32_t n;
};

static bool profiled(uint32_t device) { return device == 0 || device == UINT32_MAX; }

static vkrt_status before(void *user, uint32_t device, const char *what) {
  struct profile *p = user;
  if (!profiled(device))
    return VKRT_OK;
  if (p->n == PROFILE_MAX_OPS) { /* the library's last error would name something else */
    fprintf(stderr, "vkrt-service: --profile: the token records more than %d ops on device 0, "
                    "more than the profile holds\n", PROFILE_MAX_OPS);
    return VKRT_ERROR_INVALID_ARGUMENT;
  }
  if (!p->timer[p->n]) {
    vkrt_status s = vkrt_lab_timer_create(p->app, 0, &p->timer[p->n]);
    if (s != VKRT_OK)
      return s;
  }
  p->what[p->n] = what;
  return vkrt_lab_timer_begin(p->timer[p->n]);
}

static vkrt_status after(void *user, uint32_t device) {
  struct profile *p = user;
  return profiled(device) ? vkrt_lab_timer_end(p->timer[p->n++], true) : VKRT_OK;
}

/* Records the token at pos on every local device (with the hooks set, or none), submits and
 * waits; the wall time from the first op recorded to the last device done. */
static int one_token(struct service *s, int32_t token, uint32_t pos, double *wall) {
  vkrt_appliance *app = s->app;
  uint64_t ticket[VKRT_MAX_DEVICES];
  llama_gpu_set_step(s->gpu, token, pos);
  double t0 = now_s();
  vkrt_status st = llama_gpu_record(s->gpu, false);
  if (st != VKRT_OK) {
    fprintf(stderr, "vkrt-service: --profile: %s failed: %s: %s\n", llama_gpu_failed(s->gpu),
            vkrt_status_str(st), vkrt_last_error(app));
    return EXIT_RUNTIME;
  }
  for (uint32_t d = 0; d < s->n; d++)
    CHECK(vkrt_submit(app, d, &ticket[d]));
  for (uint32_t d = 0; d < s->n; d++)
    CHECK(vkrt_wait(app, d, ticket[d], UINT64_MAX));
  *wall = now_s() - t0;
  return 0;
}

static int profile_run(struct service *s, struct profile *p, int32_t token, uint32_t pos) {
  vkrt_appliance *app = s->app;
  double plain, timed;
  int rc = one_token(s, token, pos, &plain);
  if (rc)
    return rc;
  llama_gpu_set_hooks(s->gpu, &(struct llama_gpu_hooks){p, before, after});
  rc = one_token(s, token, pos, &timed);
  llama_gpu_set_hooks(s->gpu, NULL);
  if (rc)
    return rc;
  /* names in the order the forward pass first meets them */
  const char *name[64];
  double total[64] = {0}, sum = 0;
  uint32_t count[64] = {0}, names = 0;
  for (uint32_t i = 0; i < p->n; i++) {
    double sec;
    CHECK(vkrt_lab_timer_seconds(p->timer[i], &sec));
    uint32_t k = 0;
    while (k < names && strcmp(name[k], p->what[i]))
      k++;
    if (k == names && names < 64)
      name[names++] = p->what[i];
    if (k < names) {
      total[k] += sec;
      count[k]++;
    }
    sum += sec;
  }
  printf("vkrt-service: profile: one token at position %u on device 0 of %u, recorded directly "
         "(not the graph): %u ops, their GPU times sum to %.1f us; the token took %.1f us with a "
         "timer and a full barrier around each op, %.1f us without\n", pos, s->n, p->n,
         sum * 1e6, timed * 1e6, plain * 1e6);
  int width = 24; /* the longest name's, so the columns line up */
  for (uint32_t k = 0; k < names; k++)
    width = strlen(name[k]) > (size_t)width ? (int)strlen(name[k]) : width;
  printf("vkrt-service: profile: %-*s %6s %11s %9s %7s\n", width, "op", "count", "us total",
         "us each", "share");
  for (uint32_t k = 0; k < names; k++)
    printf("vkrt-service: profile: %-*s %6u %11.1f %9.2f %6.1f%%\n", width, name[k], count[k],
           total[k] * 1e6, total[k] * 1e6 / count[k], sum > 0 ? 100 * total[k] / sum : 0);
  return 0;
}

int model_profile(struct service *s, const struct generation *gen) {
  if (!gen->fed)
    return 0;
  struct profile *p = calloc(1, sizeof(*p));
  if (!p) {
    fprintf(stderr, "vkrt-service: --profile: out of host memory\n");
    return EXIT_RUNTIME;
  }
  p->app = s->app;
  vkrt_status st = vkrt_lab_timer_create(s->app, 0, &p->timer[0]);
  if (st != VKRT_OK) { /* UNSUPPORTED: a device without timestamps */
    fprintf(stderr, "vkrt-service: --profile: %s: %s\n", vkrt_status_str(st),
            vkrt_last_error(s->app));
    free(p);
    return st == VKRT_ERROR_UNSUPPORTED ? 0 : EXIT_RUNTIME;
  }
  uint32_t last = gen->fed - 1;
  int rc = profile_run(s, p, gen->ids[last], (uint32_t)s->args->depth + last);
  for (uint32_t i = 0; i < PROFILE_MAX_OPS && p->timer[i]; i++)
    vkrt_lab_timer_destroy(p->timer[i]);
  free(p);
  return rc;
}
#else
int model_profile(struct service *s, const struct generation *gen) {
  (void)s, (void)gen;
  fprintf(stderr, "vkrt-service: --profile needs a build with the lab\n");
  return EXIT_USAGE;
}
#endif
