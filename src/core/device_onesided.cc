#include "core/device_onesided.h"

#include "core/comm.h"
#include "core/device_enqueue.h"
#include "core/signals.h"
#include "exec/cuda/dev_work.h"

namespace coll {

using exec::dev::DevWindow;

namespace {

// One launch of w on stream: a one-sided work of the window kernel, bytes as int8.
Status launch(collComm* comm, const DevWindow& w, collStream_t stream, const char* name) {
  exec::Work work;
  work.window = &w;
  work.opName = name;
  work.channel = 0;
  work.timeoutMs = comm->timeoutMs.load(std::memory_order_relaxed);
  work.args = exec::ExecArgs{nullptr, nullptr, collInt8, collSum, comm->nranks};
  work.args.direct = false;
  return enqueueDeviceWork(comm, work, stream);
}

}  // namespace

Status enqueuePutSignalDevice(collComm* comm, const void* src, size_t bytes, char* dst, int peer, collStream_t stream) {
  DevWindow w{};
  if (bytes > 0) {
    w.nmoves = 1;
    w.moves[0].nsrc = 1;
    w.moves[0].ndst = 1;
    w.moves[0].src[0] = static_cast<const char*>(src);
    w.moves[0].dst[0] = dst;
    w.moves[0].count = bytes;
  }
  w.signal = comm->signals->slot(peer);
  return launch(comm, w, stream, "collPutSignal");
}

Status enqueueSignalDevice(collComm* comm, int peer, collStream_t stream) {
  DevWindow w{};
  w.signal = comm->signals->slot(peer);
  return launch(comm, w, stream, "collSignal");
}

Status enqueueWaitSignalDevice(collComm* comm, const std::vector<SignalWait>& waits, collStream_t stream) {
  Signals& s = *comm->signals;
  // A wait on more peers than one launch's conditions hold is several launches, in order.
  for (size_t first = 0; first < waits.size(); first += exec::dev::kWindowMaxRanks) {
    DevWindow w{};
    for (size_t i = first; i < waits.size() && w.nwaits < exec::dev::kWindowMaxRanks; ++i) {
      const SignalWait& c = waits[i];
      // What the waits issued so far have taken, plus this one: the stream waits for that total.
      w.waitWord[w.nwaits] = s.own(c.peer);
      w.waitValue[w.nwaits] = s.consumed(c.peer) + c.count;
      w.waitPeer[w.nwaits] = c.peer;
      ++w.nwaits;
    }
    COLL_TRY(launch(comm, w, stream, "collWaitSignal"));
    for (size_t i = first; i < waits.size() && i < first + exec::dev::kWindowMaxRanks; ++i)
      s.consumed(waits[i].peer) += waits[i].count;
  }
  return Status::ok();
}

}  // namespace coll
