/* vkrt_allreduce: validates the arguments, handles the one-device case (a copy), and hands
 * the job to the transport under the collective's lock. */
#include <string.h>

#include "base/base.h"
#include "transport/collective.h"
#include "transport/transport.h"

/* ---- allreduce -------------------------------------------------------------------------- */

static vkrt_status check_buffer(struct vkrt_system *sys, const char *what, uint32_t d,
                                const vkrt_buffer *b, uint64_t offset, uint64_t bytes) {
  uint64_t end;
  if (!b)
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT, "allreduce: %s[%u] is NULL", what,
                      d);
  if (b->dev->sys != sys)
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "allreduce: %s[%u] is a buffer of another appliance", what, d);
  if (b->dev->index != d)
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "allreduce: %s[%u] is a buffer of dev%u; rank d must use a buffer of dev d",
                      what, d, b->dev->index);
  if (!vkrt_add_u64(offset, bytes, &end) || end > b->size)
    return vkrt_error(&sys->base, VKRT_ERROR_INVALID_ARGUMENT,
                      "allreduce: %s[%u] range [%llu, +%llu) is outside its buffer of %llu bytes",
                      what, d, (unsigned long long)offset, (unsigned long long)bytes,
                      (unsigned long long)b->size);
  return VKRT_OK;
}

vkrt_status vkrt_collective_allreduce(struct vkrt_collective *coll, const vkrt_allreduce_args *args) {
  struct vkrt_system *sys = coll->sys;
  struct vkrt_base *base = &sys->base;
  if (!args)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "allreduce: args is NULL");
  if (args->type != VKRT_TYPE_F32 && args->type != VKRT_TYPE_F16)
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                      "allreduce: type %d is not f32 or f16", (int)args->type);
  struct vkrt_allreduce_job job = {.args = args,
                                   .elem_size = args->type == VKRT_TYPE_F32 ? 4 : 2};
  if (!vkrt_mul_u64(args->count, job.elem_size, &job.bytes))
    return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT, "allreduce: count %llu overflows",
                      (unsigned long long)args->count);
  for (uint32_t d = 0; d < sys->device_count; d++) {
    vkrt_status s = check_buffer(sys, "send", d, args->send[d], args->send_offset[d], job.bytes);
    if (s == VKRT_OK)
      s = check_buffer(sys, "recv", d, args->recv[d], args->recv_offset[d], job.bytes);
    if (s != VKRT_OK)
      return s;
    uint64_t so = args->send_offset[d], ro = args->recv_offset[d];
    if (so % job.elem_size || ro % job.elem_size)
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                        "allreduce: dev%u offsets (send %llu, recv %llu) must be multiples of the "
                        "element size %llu", d, (unsigned long long)so, (unsigned long long)ro,
                        (unsigned long long)job.elem_size);
    if (args->send[d] == args->recv[d] && so != ro && so < ro + job.bytes && ro < so + job.bytes)
      return vkrt_error(base, VKRT_ERROR_INVALID_ARGUMENT,
                        "allreduce: send[%u] and recv[%u] overlap without being the same range "
                        "(in place needs equal offsets)", d, d);
  }
  vkrt_status s = vkrt_collective_status(coll);
  if (s != VKRT_OK || job.bytes == 0)
    return s;
  if (coll->capture && coll->transport && !coll->type->replay)
    return vkrt_error(base, VKRT_ERROR_UNSUPPORTED,
                      "allreduce: the %s transport cannot be captured in a graph (it reduces "
                      "on the caller's thread); record it directly", coll->type->name);
  for (uint32_t d = 0; d < sys->device_count; d++) { /* a graph checks they still exist */
    vkrt_stream_capture_use(&sys->devices[d], args->send[d]);
    vkrt_stream_capture_use(&sys->devices[d], args->recv[d]);
  }
  pthread_mutex_lock(&coll->lock);
  if (!coll->transport) { /* one device: the sum of one contribution is a copy */
    if (args->send[0] != args->recv[0] || args->send_offset[0] != args->recv_offset[0])
      s = vkrt_collective_record_copy(&sys->devices[0], args->recv[0]->handle,
                                      args->recv_offset[0], args->send[0]->handle,
                                      args->send_offset[0], job.bytes);
  } else {
    s = coll->type->allreduce(coll->transport, &job);
  }
  pthread_mutex_unlock(&coll->lock);
  for (uint32_t d = 0; d < sys->device_count; d++) { /* a destroy waits for these */
    vkrt_stream_note_use(&sys->devices[d], args->send[d]);
    vkrt_stream_note_use(&sys->devices[d], args->recv[d]);
  }
  return s;
}

/* ---- graph capture ---------------------------------------------------------------------- */

vkrt_status vkrt_collective_capture_begin(struct vkrt_collective *coll,
                                          struct vkrt_collective_capture *cap) {
  memset(cap, 0, sizeof(*cap));
  if (!coll)
    return VKRT_OK;
  pthread_mutex_lock(&coll->lock);
  cap->seq0 = coll->transport && coll->type->sequence ? coll->type->sequence(coll->transport) : 0;
  coll->capture = cap;
  pthread_mutex_unlock(&coll->lock);
  return VKRT_OK;
}

vkrt_status vkrt_collective_capture_end(struct vkrt_collective *coll) {
  if (!coll || !coll->capture)
    return VKRT_OK;
  vkrt_status s = VKRT_OK;
  pthread_mutex_lock(&coll->lock);
  if (coll->transport && coll->type->capture_end)
    s = coll->type->capture_end(coll->transport, coll->capture);
  coll->capture = NULL;
  pthread_mutex_unlock(&coll->lock);
  return s;
}

vkrt_status vkrt_collective_capture_piece(struct vkrt_collective *coll, uint64_t count,
                                          vkrt_type type) {
  struct vkrt_collective_capture *cap = coll->capture;
  if (cap->pieces == VKRT_GRAPH_MAX_PIECES) {
    cap->overflow = true;
    return vkrt_error(&coll->sys->base, VKRT_ERROR_OUT_OF_HOST_MEMORY,
                      "%s: graph capture: more than %d allreduce pieces in one graph",
                      coll->type->name, VKRT_GRAPH_MAX_PIECES);
  }
  cap->piece[cap->pieces].count = count;
  cap->piece[cap->pieces++].type = type;
  return VKRT_OK;
}

vkrt_status vkrt_collective_replay(struct vkrt_collective *coll,
                                   const struct vkrt_collective_capture *cap, uint64_t *shift) {
  *shift = 0;
  if (!coll || !coll->transport || !cap->pieces)
    return VKRT_OK;
  pthread_mutex_lock(&coll->lock);
  vkrt_status s = coll->type->replay(coll->transport, cap, shift);
  pthread_mutex_unlock(&coll->lock);
  return s;
}
