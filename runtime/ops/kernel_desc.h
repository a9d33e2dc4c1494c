/* What the kernel pipeline generates for each enabled kernel (build/gen/kernels/<name>.c). */
#pragma once
#include <stddef.h>
#include <stdint.h>

struct vkrt_kernel_desc {
  const char *name;
  const uint32_t *code;
  size_t code_size;      /* bytes */
  uint32_t push_size;    /* reflected push-constant block size */
  uint32_t local_size[3];
  uint32_t binding_count; /* storage buffers at bindings 0..N-1 of set 0 */
  uint32_t shared_bytes;  /* workgroup memory of literal size (specialized sizes not counted) */
};
