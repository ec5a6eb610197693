// Host streams: creation, destruction, synchronization and query (core/host_stream.h).
#include "api/api_util.h"
#include "api/last_error.h"
#include "coll/coll.h"
#include "core/host_stream.h"

using coll::HostStream;
using coll::Status;

namespace {

// The live host stream behind handle, or why there is none.
Status lookup(collStream_t handle, HostStream** out) {
  if (!handle) return Status(collInvalidArgument, "the stream is NULL");
  *out = HostStream::find(handle);
  if (*out) return Status::ok();
  return Status(collInvalidArgument,
                "the stream is not a live coll host stream (made by collHostStreamCreate and not destroyed); CUDA "
                "streams are not supported yet");
}

// A failure an operation on the stream reported: its sentence already names the call and the
// rank (and was logged when it happened), so it becomes the thread's last error as it is.
collResult_t report(Status s) {
  if (s.isOk() || s.code() == collInProgress) return s.code();
  coll::api::setLastError(nullptr, s.message());
  return s.code();
}

}  // namespace

COLL_API collResult_t collHostStreamCreate(collStream_t* stream) {
  return coll::api::guarded("collHostStreamCreate", nullptr, [&]() -> Status {
    if (!stream) return Status(collInvalidArgument, "stream is NULL");
    *stream = HostStream::create()->handle();
    return Status::ok();
  });
}

COLL_API collResult_t collHostStreamDestroy(collStream_t stream) {
  HostStream* s = nullptr;
  Status found = lookup(stream, &s);
  if (!found.isOk()) return coll::api::finish("collHostStreamDestroy", nullptr, std::move(found));
  return report(HostStream::destroy(s));
}

COLL_API collResult_t collStreamSynchronize(collStream_t stream) {
  if (!stream) return collSuccess;  // NULL: host calls on it have completed when they returned
  HostStream* s = nullptr;
  Status found = lookup(stream, &s);
  if (!found.isOk()) return coll::api::finish("collStreamSynchronize", nullptr, std::move(found));
  return report(s->synchronize());
}

COLL_API collResult_t collStreamQuery(collStream_t stream) {
  if (!stream) return collSuccess;
  HostStream* s = nullptr;
  Status found = lookup(stream, &s);
  if (!found.isOk()) return coll::api::finish("collStreamQuery", nullptr, std::move(found));
  return report(s->query());
}
