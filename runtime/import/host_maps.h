/* Is a host range backed by a file? Drivers that refuse file-backed pages (NVIDIA, RADV) are
 * then not even asked: on NVIDIA 580 a refused import made the following imports of
 * anonymous memory fail too, so import-then-prestage pre-stages such ranges directly. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Pure: scans /proc/<pid>/maps text (lines "start-end perms offset dev inode [path]") and
 * returns true when any mapping overlapping [begin, end) has a non-zero inode. */
bool vkrt_maps_range_file_backed(const char *maps, size_t len, uint64_t begin, uint64_t end);

/* Reads /proc/self/maps in pieces (no allocation) and applies the scan; false when it cannot
 * be read (then the import is simply tried). */
bool vkrt_host_range_file_backed(uint64_t begin, uint64_t end);
