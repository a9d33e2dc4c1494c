/* Names of the transports, compiled in every build (vkrt_transport_str is public). */
#include "base/base.h"
#include "transport/collective.h"

const char *vkrt_transport_str(vkrt_transport_kind kind) {
  switch (kind) {
  case VKRT_TRANSPORT_NONE: return "none";
  case VKRT_TRANSPORT_NATIVE_FD: return "native_fd";
  case VKRT_TRANSPORT_CPU_PROXY: return "cpu_proxy";
  case VKRT_TRANSPORT_HOST_STAGED: return "host_staged";
  }
  return "unknown";
}
