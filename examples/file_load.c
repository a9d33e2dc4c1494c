/* file_load: the weights path. A file is mapped read-only, registered once with
 * vkrt_host_register (the board's import policy decides per device: import the pages,
 * pre-stage one copy, or stage), and uploaded to every device straight from the mapping; the
 * bytes read back must equal the file's.
 *   file_load [FILE]   (without FILE: a 4 MiB file of random bytes under /tmp, removed after) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vkrt/vkrt.h>

static int make_file(char *path, size_t size) {
  int fd = mkstemp(path);
  if (fd < 0)
    return -1;
  unlink(path); /* nothing is left behind, whatever happens */
  uint64_t block[512];
  for (size_t done = 0; done < size; done += sizeof block) {
    for (size_t i = 0; i < 512; i++) /* every word different (a multiplicative hash) */
      block[i] = (done / 8 + i + 1) * 0x9e3779b97f4a7c15ull;
    if (write(fd, block, sizeof block) != (ssize_t)sizeof block) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

int main(int argc, char **argv) {
  char tmp[] = "/tmp/vkrt-file-load.XXXXXX";
  int fd = argc > 1 ? open(argv[1], O_RDONLY) : make_file(tmp, 4u << 20);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
    perror(argc > 1 ? argv[1] : "file_load: temporary file");
    return 1;
  }
  size_t size = (size_t)st.st_size;
  const void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    perror("file_load: mmap");
    return 1;
  }

  vkrt_options options;
  vkrt_options_initialize(&options);
  vkrt_appliance *app = NULL;
  char why[512];
  vkrt_status s = vkrt_open(&options, &app, why, sizeof why);
  if (s != VKRT_OK) {
    fprintf(stderr, "file_load: vkrt_open: %s: %s\n", vkrt_status_str(s), why);
    return 1;
  }
  vkrt_register_info info;
  s = vkrt_host_register(app, map, size, NULL, NULL, &info);
  if (s != VKRT_OK) {
    fprintf(stderr, "file_load: vkrt_host_register: %s: %s\n", vkrt_status_str(s),
            vkrt_last_error(app));
    return 1;
  }
  int bad = 0;
  unsigned char *back = malloc(size);
  for (uint32_t d = 0; d < vkrt_device_count(app) && back && !bad; d++) {
    vkrt_buffer *b = NULL;
    memset(back, 0xa5, size); /* poison */
    s = vkrt_buffer_create(app, d, size, VKRT_BUFFER_DEVICE_LOCAL, &b);
    if (s == VKRT_OK)
      s = vkrt_upload(b, 0, map, size);
    if (s == VKRT_OK)
      s = vkrt_download(back, b, 0, size);
    if (s != VKRT_OK) {
      fprintf(stderr, "file_load: device %u: %s: %s\n", d, vkrt_status_str(s),
              vkrt_last_error(app));
      bad = 1;
    } else if (memcmp(back, map, size) != 0) {
      fprintf(stderr, "file_load: device %u: the bytes read back differ from the file\n", d);
      bad = 1;
    } else {
      printf("file_load: device %u: %zu bytes via %s (%s)\n", d, size,
             vkrt_import_path_str(info.path[d]), info.reason[d]);
    }
    vkrt_buffer_destroy(b);
  }
  vkrt_upload_counters counters;
  if (!bad && vkrt_upload_counters_get(app, &counters) == VKRT_OK)
    printf("file_load: %u chunks; uploaded %llu bytes from imported pages, %llu pre-staged, "
           "%llu through the staging ring\n", info.chunk_count,
           (unsigned long long)counters.imported_bytes,
           (unsigned long long)counters.prestaged_bytes,
           (unsigned long long)counters.staged_bytes);
  free(back);
  vkrt_host_unregister(app, map);
  vkrt_close(app);
  munmap((void *)map, size);
  return bad || !back;
}
