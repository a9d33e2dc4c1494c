/* vkrt-probe: opens the board's appliance and prints the board, each device's
 * capabilities and the plans the runtime made (NCCL-style lines, or one JSON object with
 * --json). Exits non-zero with the reason when no device matches the board. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hosts.h" /* under mpirun, the appliance spans the ranks */
#include "vkrt/vkrt.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: vkrt-probe [--json] [--devices N] [--simulated | --physical-only]\n"
          "                  [--physical I[,J...]] [--validation] [--sync-validation]\n"
          "                  [--verbose] [--fault NAME[:DEV[,DEV...]]]... [--exercise]\n"
          "                  [--activations f32|q8|f16|q8,f16] [--q8-columns N] [--version]\n"
          "Prints the board, each device's capabilities and the transport/import plan.\n"
          "  --devices N        open N devices instead of the board's count\n"
          "  --physical I,J     rank r uses physical device I, J, ... (by enumeration index)\n"
          "  --fault NAME:DEVS  fault injection (CONFIG_VKRT_FAULT_INJECTION=y builds): NAME is\n"
          "                     hide-semfd, hide-memhost, import-fails, prestage-alloc-fails,\n"
          "                     peer-stall, device-lost, hide-transfer, refuse-file-backed; DEVS\n"
          "                     the devices it applies to (all when omitted; one device set\n"
          "                     for all faults)\n"
          "  --exercise         before describing, upload 4 MiB to every device registered\n"
          "                     (straddling chunks) and unregistered, so the upload counters\n"
          "                     show each path taken (1 MiB import chunks in fault-injection\n"
          "                     builds, so uploads straddle them)\n"
          "  --activations q8   open with VKRT_ACTIVATIONS_Q8: each device's line says whether\n"
          "                     its quantized matvec rounds x to 8 bits, and why not\n"
          "  --q8-columns N     with it, small batches up to N columns too\n"
          "                     (vkrt_options.quant_activations_columns): from which M, per type\n"
          "  --activations f16  open with VKRT_MATMUL_ACTIVATIONS_F16: each device's matmul line\n"
          "                     says whether its tiled matmul runs on cooperative matrices (x\n"
          "                     rounded to f16), and why not\n");
}

/* The last error the log printed, so a failed open does not print its reason twice. */
static char logged_error[1024];

static void log_stderr(void *user, vkrt_log_level level, const char *message) {
  (void)user;
  static const char *const names[] = {"error", "warn", "info", "debug"};
  fprintf(stderr, "vkrt-probe: %s: %s\n", names[level & 3], message);
  if (level == VKRT_LOG_ERROR)
    snprintf(logged_error, sizeof(logged_error), "%s", message);
}

static int parse_u32(const char *s, uint32_t *out) {
  char *end;
  unsigned long v = strtoul(s, &end, 0);
  if (!*s || *end || v > 0xffffffffUL)
    return -1;
  *out = (uint32_t)v;
  return 0;
}

#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
static int parse_fault(const char *arg, vkrt_fault_options *faults) {
  static const struct {
    const char *name;
    uint32_t bit;
  } names[] = {
      {"hide-semfd", VKRT_FAULT_HIDE_EXTERNAL_SEMAPHORE_FD},
      {"hide-memhost", VKRT_FAULT_HIDE_EXTERNAL_MEMORY_HOST},
      {"import-fails", VKRT_FAULT_IMPORT_FAILS},
      {"prestage-alloc-fails", VKRT_FAULT_PRESTAGE_ALLOC_FAILS},
      {"peer-stall", VKRT_FAULT_PEER_STALL},
      {"device-lost", VKRT_FAULT_DEVICE_LOST},
      {"hide-transfer", VKRT_FAULT_HIDE_TRANSFER_QUEUE},
      {"refuse-file-backed", VKRT_FAULT_REFUSE_FILE_BACKED},
  };
  char name[64];
  const char *colon = strchr(arg, ':');
  size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
  if (len >= sizeof(name))
    return -1;
  memcpy(name, arg, len);
  name[len] = '\0';
  uint32_t bit = 0;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(names[i].name, name) == 0)
      bit = names[i].bit;
  if (!bit)
    return -1;
  faults->mask |= bit;
  if (colon) {
    char list[128];
    snprintf(list, sizeof(list), "%s", colon + 1);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
      uint32_t dev;
      if (parse_u32(tok, &dev) || dev >= VKRT_MAX_DEVICES)
        return -1;
      faults->device_mask |= 1u << dev;
    }
  }
  return 0;
}
#endif

/* A small run over every upload path: a registered anonymous region (chunk-straddling
 * uploads included), then the same bytes unregistered (staging ring). */
static vkrt_status exercise(vkrt_appliance *app) {
  const size_t size = 4u << 20;
  uint8_t *mem = aligned_alloc(1u << 16, size);
  if (!mem)
    return VKRT_ERROR_OUT_OF_HOST_MEMORY;
  for (size_t i = 0; i < size; i++)
    mem[i] = (uint8_t)(i * 131u + 7u);
  vkrt_status s = vkrt_host_register(app, mem, size, NULL, NULL, NULL);
  for (uint32_t d = 0; s == VKRT_OK && d < vkrt_device_count(app); d++) {
    vkrt_buffer *buf = NULL;
    s = vkrt_buffer_create(app, d, size, VKRT_BUFFER_DEVICE_LOCAL, &buf);
    for (int registered = 1; s == VKRT_OK && registered >= 0; registered--) {
      if (!registered && d + 1 == vkrt_device_count(app))
        s = vkrt_host_unregister(app, mem);
      if (s == VKRT_OK)
        s = vkrt_upload(buf, 0, mem, size);
      if (s == VKRT_OK)
        s = vkrt_upload(buf, 3, mem + 12345, size - 2 * 12345);
    }
    vkrt_buffer_destroy(buf);
  }
  free(mem);
  return s;
}

int main(int argc, char **argv) {
  vkrt_options options;
  vkrt_options_initialize(&options);
  options.log = log_stderr;
  options.log_level = VKRT_LOG_WARN;
  bool json = false, run = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--json") == 0) {
      json = true;
    } else if (strcmp(a, "--exercise") == 0) {
      run = true;
    } else if (strcmp(a, "--validation") == 0) {
      options.enable_validation = true;
    } else if (strcmp(a, "--sync-validation") == 0) {
      options.enable_validation = options.enable_sync_validation = true;
    } else if (strcmp(a, "--simulated") == 0) {
      options.simulated = true;
    } else if (strcmp(a, "--physical-only") == 0) {
      options.physical_only = true;
    } else if (strcmp(a, "--verbose") == 0) {
      options.log_level = VKRT_LOG_DEBUG;
    } else if (strcmp(a, "--devices") == 0 && next) {
      if (parse_u32(next, &options.device_count) || options.device_count < 1 ||
          options.device_count > VKRT_MAX_DEVICES) {
        fprintf(stderr, "vkrt-probe: --devices wants 1..%d, got '%s'\n", VKRT_MAX_DEVICES, next);
        return 2;
      }
      i++;
    } else if (strcmp(a, "--physical") == 0 && next) {
      char list[128];
      snprintf(list, sizeof(list), "%s", next);
      int r = 0;
      for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","), r++) {
        uint32_t idx;
        if (r >= VKRT_MAX_DEVICES || parse_u32(tok, &idx) || idx > 0x7fffffff) {
          fprintf(stderr, "vkrt-probe: bad --physical list '%s'\n", next);
          return 2;
        }
        options.physical_device_index[r] = (int32_t)idx;
      }
      i++;
    } else if (strcmp(a, "--fault") == 0 && next) {
#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
      if (parse_fault(next, &options.faults)) {
        fprintf(stderr, "vkrt-probe: bad --fault '%s'\n", next);
        usage(stderr);
        return 2;
      }
#else
      fprintf(stderr, "vkrt-probe: --fault needs a CONFIG_VKRT_FAULT_INJECTION=y build\n");
      return 2;
#endif
      i++;
    } else if (strcmp(a, "--activations") == 0 && next) {
      bool q8 = !strcmp(next, "q8") || !strcmp(next, "q8,f16");
      bool f16 = !strcmp(next, "f16") || !strcmp(next, "q8,f16");
      if (!q8 && !f16 && strcmp(next, "f32")) {
        fprintf(stderr, "vkrt-probe: bad --activations '%s' (f32, q8, f16 or q8,f16)\n", next);
        usage(stderr);
        return 2;
      }
      options.quant_activations = q8 ? VKRT_ACTIVATIONS_Q8 : VKRT_ACTIVATIONS_F32;
      options.matmul_activations = f16 ? VKRT_MATMUL_ACTIVATIONS_F16 : VKRT_MATMUL_ACTIVATIONS_F32;
      i++;
    } else if (strcmp(a, "--q8-columns") == 0 && next) {
      options.quant_activations_columns = (uint32_t)strtoul(next, NULL, 10);
      i++;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "--version") == 0) {
      printf("vkrt-probe %s (board %s)\n", vkrt_version(), vkrt_config_value("CONFIG_VKRT_BOARD"));
      return 0;
    } else {
      fprintf(stderr, "vkrt-probe: unknown argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }

#if IS_ENABLED(CONFIG_VKRT_FAULT_INJECTION)
  if (run && !options.faults.import_chunk_cap)
    options.faults.import_chunk_cap = 1u << 20; /* so --exercise straddles chunks */
#endif
  tool_hosts_init(); /* several MPI ranks: one host each; host0 prints the hierarchy */
  tool_hosts_attach(&options);
  vkrt_appliance *app = NULL;
  char why[1024];
  vkrt_status s = vkrt_open(&options, &app, why, sizeof(why));
  if (s != VKRT_OK) {
    if (why[0] && strstr(logged_error, why))
      fprintf(stderr, "vkrt-probe: cannot open board '%s' (the error above)\n", CONFIG_VKRT_BOARD);
    else
      fprintf(stderr, "vkrt-probe: cannot open board '%s': %s: %s\n", CONFIG_VKRT_BOARD,
              vkrt_status_str(s), why);
    tool_hosts_finish(1);
    return 1;
  }
  if (run && (s = exercise(app)) != VKRT_OK) {
    fprintf(stderr, "vkrt-probe: --exercise: %s: %s\n", vkrt_status_str(s), vkrt_last_error(app));
    vkrt_close(app);
    tool_hosts_finish(1);
    return 1;
  }
  size_t need = vkrt_describe(app, json, NULL, 0);
  char *text = malloc(need + 1);
  if (!text) {
    vkrt_close(app);
    fprintf(stderr, "vkrt-probe: out of memory\n");
    return 1;
  }
  vkrt_describe(app, json, text, need + 1);
  fputs(text, stdout);
  free(text);
  uint32_t messages = vkrt_validation_message_count(app);
  vkrt_close(app);
  tool_hosts_finish(messages ? 1 : 0);
  if (messages) {
    fprintf(stderr, "vkrt-probe: %u validation message(s)\n", messages);
    return 1;
  }
  return 0;
}
