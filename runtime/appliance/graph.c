/* Captured graphs (vkrt.h "captured graphs"): the contract is public so that callers can be
 * written against it; capture is not implemented yet, so every entry point says so. */
#include "appliance/appliance.h"
#include "base/base.h"

static vkrt_status not_yet(vkrt_appliance *app, const char *what) {
  if (!app)
    return VKRT_ERROR_INVALID_ARGUMENT;
  return vkrt_error(&app->sys.base, VKRT_ERROR_UNSUPPORTED,
                    "%s: graph capture is not implemented yet; record directly", what);
}

vkrt_status vkrt_graph_begin(vkrt_appliance *app) { return not_yet(app, "vkrt_graph_begin"); }

vkrt_status vkrt_graph_end(vkrt_appliance *app, vkrt_graph **out) {
  if (out)
    *out = NULL;
  return not_yet(app, "vkrt_graph_end");
}

vkrt_status vkrt_graph_launch(vkrt_graph *graph, uint64_t *tickets) {
  (void)graph;
  (void)tickets;
  return VKRT_ERROR_UNSUPPORTED; /* no graph can exist yet */
}

void vkrt_graph_destroy(vkrt_graph *graph) { (void)graph; }
