#include "import/host_maps.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One maps line; returns -1 when it cannot be parsed, else 1 for file-backed overlap, 0 not. */
static int scan_line(const char *line, size_t len, uint64_t begin, uint64_t end) {
  char buf[512];
  if (len >= sizeof(buf))
    len = sizeof(buf) - 1; /* paths are last; the fields we need come first */
  memcpy(buf, line, len);
  buf[len] = '\0';
  unsigned long long lo, hi, offset, inode;
  char perms[8], dev[32];
  if (sscanf(buf, "%llx-%llx %7s %llx %31s %llu", &lo, &hi, perms, &offset, dev, &inode) != 6)
    return -1;
  if (hi <= begin || lo >= end)
    return 0;
  return inode != 0;
}

bool vkrt_maps_range_file_backed(const char *maps, size_t len, uint64_t begin, uint64_t end) {
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || maps[i] == '\n') {
      if (i > start && scan_line(maps + start, i - start, begin, end) == 1)
        return true;
      start = i + 1;
    }
  }
  return false;
}

bool vkrt_host_range_file_backed(uint64_t begin, uint64_t end) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  char buf[8192];
  size_t have = 0;
  bool found = false;
  for (;;) {
    ssize_t n = read(fd, buf + have, sizeof(buf) - have);
    if (n <= 0)
      break;
    have += (size_t)n;
    /* Scan the complete lines; keep the partial last one for the next read. */
    size_t last_nl = have;
    while (last_nl > 0 && buf[last_nl - 1] != '\n')
      last_nl--;
    if (last_nl == 0) { /* one line longer than the buffer: skip its rest */
      have = 0;
      continue;
    }
    if (vkrt_maps_range_file_backed(buf, last_nl - 1, begin, end)) {
      found = true;
      break;
    }
    memmove(buf, buf + last_nl, have - last_nl);
    have -= last_nl;
  }
  if (!found && have > 0)
    found = vkrt_maps_range_file_backed(buf, have, begin, end);
  close(fd);
  return found;
}
