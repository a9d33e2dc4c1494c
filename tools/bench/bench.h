/* vkrt-bench: one binary, one subcommand per module (upload, allreduce, copy, ...). Each
 * subcommand file registers itself with BENCH_COMMAND, so modules stay independent. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/numbers.h"  /* f16 <-> f32, vkrt_xorshift */
#include "vkrt/kconfig.h" /* IS_ENABLED and this build's CONFIG_ symbols */
#include "vkrt/vkrt.h"
#include "vkrt/vkrt_lab.h" /* benches use vkrt.h, vkrt_mpi.h and this only; its functions
                              exist with CONFIG_VKRT_LAB, and so do the files that call them */

struct bench_command {
  const char *name;
  const char *help;
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
  struct bench_command *next;
};

void bench_register(struct bench_command *cmd);

#define BENCH_COMMAND(ident, cmd_name, cmd_help, fn)                                     \
  static struct bench_command bench_cmd_##ident = {.name = cmd_name, .help = cmd_help,   \
                                                   .run = fn};                           \
  __attribute__((constructor)) static void bench_register_##ident(void) {                \
    bench_register(&bench_cmd_##ident);                                                  \
  }

/* vkrt-bench upload --file (load.c): vkrt_load_file per path against the disk and pinned
 * rates of the same run. */
int bench_load_file(int argc, char **argv);

/* Shared helpers. */
double bench_now_s(void);
/* CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID): host work without the time the
 * thread waited or was descheduled (on a loaded machine the wall clock is mostly the latter). */
double bench_thread_cpu_s(void);
/* The waits' spin budget of every appliance the bench opens (vkrt_options.wait_spin_us), as
 * vkrt-service asks for, unless the caller's options name one. */
#define BENCH_WAIT_SPIN_US 20000u
/* Opens the board's appliance with a stderr log at WARN and the bench's spin budget; exits
 * with a message on error. */
vkrt_appliance *bench_open(const vkrt_options *options_or_null);
/* Median of n doubles (sorts in place). */
double bench_median(double *v, int n);
/* Parses "4K", "256M", "1G" (powers of 1024) into bytes; returns false on junk. */
bool bench_parse_size(const char *text, uint64_t *out);
/* Fills `blocks` blocks of a block type (Q8_0, Q4_K, Q6_K) at p with random bytes from the
 * generator state *state (vkrt_xorshift), then sets every f16 scale (d, and dmin for Q4_K)
 * small and finite: high byte 0x20..0x23 (about 0.008..0.016), so no NaN/Inf scales (Q6_K's
 * int8 scales stay random). */
void bench_random_blocks(vkrt_type type, uint8_t *p, uint64_t blocks, uint64_t *state);
#define BENCH_MIN(a, b) ((a) < (b) ? (a) : (b))
static inline uint64_t bench_align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static inline uint64_t bench_align_down(uint64_t v, uint64_t a) { return v / a * a; }

/* ---- with the lab only (CONFIG_VKRT_LAB; tools/Sources builds these files with it) ---- */

/* Runs record(user), which records into device's stream, then vkrt_finish; *seconds is the
 * time between GPU timestamps around the recorded work when timer is non-NULL (the second
 * one after a full stream barrier when `barrier`), else (or when the timestamps cannot be
 * read) the wall clock of record + submit + wait. Returns record's status (the device
 * finished after a failure too), else vkrt_finish's. */
/* Wall clock of the last bench_time_recorded: the record callback alone (host time of the
 * recording calls) and the whole, recording + submit + wait (what test-backend-ops perf
 * measures: the time the caller waits for the work). */
extern double bench_last_record_s, bench_last_wall_s;
vkrt_status bench_time_recorded(vkrt_appliance *app, uint32_t device, vkrt_lab_timer *timer,
                                bool barrier, vkrt_status (*record)(void *user), void *user,
                                double *seconds);

/* The raw floors an allreduce between devices is held against (us, median; 0 = not
 * measurable here): submit + spin on one queue, a hand-over to the device's transfer queue
 * and to device 1, each by a GPU wait and by a host relay (allreduce --latency). Measured on
 * an appliance of its own through the lab (floors.c); without it all 0, and a line says so. */
struct bench_floors {
  double one_queue, queues_gpu, queues_relay, devices_gpu, devices_relay;
};
#if IS_ENABLED(CONFIG_VKRT_LAB)
void bench_latency_floors(uint32_t devices, bool json, struct bench_floors *out);
#else
static inline void bench_latency_floors(uint32_t devices, bool json, struct bench_floors *out) {
  (void)devices;
  *out = (struct bench_floors){0};
  printf(json ? "\"latency_floors_us\": null, "
              : "# raw floors: not in this build (the lab measures them: CONFIG_VKRT_LAB)\n");
}
#endif
