/* Public collective entry points, compiled in every build: with CONFIG_VKRT_COLLECTIVES=n
 * vkrt_allreduce still links and says why it cannot run. */
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

vkrt_transport_kind vkrt_transport(const vkrt_appliance *appliance) {
  return appliance ? vkrt_collective_kind(appliance) : VKRT_TRANSPORT_NONE;
}

vkrt_status vkrt_allreduce(vkrt_appliance *appliance, const vkrt_allreduce_args *args) {
  if (!appliance)
    return VKRT_ERROR_INVALID_ARGUMENT;
  if (!IS_ENABLED(CONFIG_VKRT_COLLECTIVES))
    return vkrt_error(&appliance->base, VKRT_ERROR_UNSUPPORTED,
                      "vkrt_allreduce: collectives are not in this build "
                      "(CONFIG_VKRT_COLLECTIVES=n)");
  return vkrt_collective_allreduce(appliance, args);
}

uint32_t vkrt_host_rank(const vkrt_appliance *appliance) {
  uint32_t rank = 0, count = 1;
  if (appliance)
    vkrt_collective_hosts(appliance, &rank, &count);
  return rank;
}

uint32_t vkrt_host_count(const vkrt_appliance *appliance) {
  uint32_t rank = 0, count = 1;
  if (appliance)
    vkrt_collective_hosts(appliance, &rank, &count);
  return count;
}
