#include "core/device_enqueue.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "algorithms/schedule.h"
#include "base/params.h"
#include "core/comm.h"
#include "core/connections.h"
#include "core/redop.h"
#include "device/runtime.h"
#include "exec/cuda/device_executor.h"
#include "kernels/cpu/reduce.h"
#include "transport/transport.h"

namespace coll {
namespace {

bool isP2P(OpKind k) { return k == OpKind::kSend || k == OpKind::kRecv; }

// The failure that breaks comm: kept as its first error, its code as the async error. The peers
// hear it (their launches may wait for this rank), and a peer's notice that explains it wins.
Status markBroken(collComm_t comm, Status s) {
  if (!comm->abortFlag.load()) s = comm->bootstrap->shareFailure(std::move(s));
  {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    if (comm->firstError.empty()) comm->firstError = s.message();
    comm->lastError = s.message();  // what collGetLastError(comm) says after collCommGetAsyncError
  }
  comm->asyncError.store(s.code());
  return s;
}

Status ensureDevicePath(collComm_t comm) {
  if (comm->deviceExecutor) return Status::ok();
  device::Runtime* rt = device::runtime();
  if (!rt) return Status(collInternalError, "a device call was accepted but there is no device runtime");
  auto conns = std::make_unique<Connections>(comm, /*device=*/true);
  auto executor = std::make_unique<exec::DeviceExecutor>(*rt, comm->nranks, comm->cudaDev);
  conns->setLinksGuard(&executor->linksMutex());
  // The same answer on every rank: the ranks' infos are shared and COLL_* must agree anyway.
  size_t llMax = static_cast<size_t>(std::max<int64_t>(0, params::kDeviceLLMax.get()));
  size_t deviceLLMax = comm->proto.ll && transport::deviceLLEverywhere(comm->bootstrap->peers()) ? llMax : 0;
  // Under errorMutex: collCommGetAsyncError may look for the executor from another thread.
  std::lock_guard<std::mutex> lock(comm->errorMutex);
  comm->deviceConns = std::move(conns);
  comm->deviceExecutor = std::move(executor);
  comm->deviceLLMax = deviceLLMax;
  return Status::ok();
}

// A collective's work: its schedule (kept alive in *schedules until the launch is built), its
// buffers, and what it needs staged.
Status collectiveWork(collComm_t comm, const OpArgs& a, std::vector<std::unique_ptr<algorithms::Schedule>>* schedules,
                      std::vector<exec::Work>* works) {
  algorithms::Collective c;
  if (!collectiveOf(a.kind, &c) || a.count == 0) return Status::ok();
  auto type = static_cast<collDataType_t>(a.type);
  size_t elem = kernels::typeSize(type);
  bool direct = false;
  // LL FIFOs hold half the data of Simple ones (8 of every 16 bytes): the schedule's chunk follows.
  bool ll = a.count * elem <= comm->deviceLLMax;
  size_t fifoBytes = ll ? comm->deviceConns->llFifoBytes() : comm->deviceConns->fifoBytes();
  auto s = std::make_unique<algorithms::Schedule>(scheduleFor(comm, a, c, &direct, fifoBytes));
  if (s->empty()) return Status::ok();
  COLL_TRY(comm->deviceConns->ensureFor(*s));
  exec::Work w;
  w.schedule = s.get();
  w.opName = a.name;
  w.args = exec::ExecArgs{a.sendbuff, a.recvbuff, type, static_cast<collRedOp_t>(a.op), comm->nranks};
  w.args.direct = false;
  w.args.ll = ll;
  if (a.premul.inUse) {
    // The interpreter scales inputs as it reads them. A collScalarDevice scalar in device memory
    // is read by the kernel at each run (a captured graph's replays see its current value, as
    // with NCCL); one in host memory, which a kernel cannot read, is read here, at enqueue.
    w.args.premul = true;
    w.args.op = collSum;
    device::Runtime* rt = device::runtime();
    int dev = -1;
    if (a.premul.residence == collScalarDevice && rt && rt->isDeviceMemory(a.premul.pointer, &dev) &&
        dev == comm->cudaDev) {
      w.args.scalarPtr = a.premul.pointer;
    } else {
      alignas(8) unsigned char scalar[8] = {};
      COLL_TRY(readScalar(a.premul, scalar));
      std::memcpy(&w.args.scalar, scalar, elem);
    }
  }
  exec::DeviceExecutor& ex = *comm->deviceExecutor;
  if (size_t need = algorithms::scratchElems(*s) * elem) {
    COLL_ASSIGN_OR_RETURN(w.args.scratch, ex.scratch(need));
  }
  // The pairwise exchange overwrites blocks it has not sent yet when the buffers overlap.
  size_t bytes = a.count * elem * static_cast<size_t>(comm->nranks);
  const char* in = static_cast<const char*>(a.sendbuff);
  const char* out = static_cast<const char*>(a.recvbuff);
  if (a.kind == OpKind::kAllToAll && in < out + bytes && out < in + bytes) {
    COLL_ASSIGN_OR_RETURN(w.args.input, ex.stage(a.sendbuff, bytes, a.stream));
  }
  schedules->push_back(std::move(s));
  works->push_back(w);
  return Status::ok();
}

Status enqueueP2P(collComm_t comm, const std::vector<OpArgs>& ops) {
  std::vector<exec::P2POp> p2p;
  std::vector<int> sendPeers, recvPeers;
  gatherP2P(ops, &p2p, &sendPeers, &recvPeers);
  if (p2p.empty()) return Status::ok();
  exec::DeviceExecutor& ex = *comm->deviceExecutor;
  for (auto& s : p2p) {
    s.ll = s.bytes <= comm->deviceLLMax;  // the receiver posts the same count: the same choice
    if (!s.isSend || !sendOverlapsRecv(s, p2p)) continue;
    COLL_ASSIGN_OR_RETURN(void* copy, ex.stage(s.buffer, s.bytes, ops.front().stream));
    s.buffer = static_cast<char*>(copy);
  }
  COLL_TRY(comm->deviceConns->ensure(sendPeers, recvPeers));
  return ex.enqueue({}, &p2p, comm->deviceConns->links(), ops.front().stream, ops.front().name);
}

}  // namespace

Status enqueueDevice(collComm_t comm, const std::vector<OpArgs>& ops) {
  if (ops.empty()) return Status::ok();
  COLL_TRY(ensureDevicePath(comm));
  Status s = comm->deviceExecutor->poll();
  std::vector<std::unique_ptr<algorithms::Schedule>> schedules;
  std::vector<exec::Work> works;
  for (const auto& a : ops) {
    if (!s.isOk()) break;
    if (!isP2P(a.kind)) s = collectiveWork(comm, a, &schedules, &works);
  }
  if (s.isOk() && !works.empty())
    s = comm->deviceExecutor->enqueue(works, nullptr, comm->deviceConns->links(), ops.front().stream,
                                      works.front().opName);
  if (s.isOk()) s = enqueueP2P(comm, ops);
  if (s.isOk()) return s;
  return markBroken(comm, std::move(s));
}

void pollDevice(collComm_t comm) {
  exec::DeviceExecutor* ex;
  {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    ex = comm->deviceExecutor.get();
  }
  if (!ex) return;
  Status s = ex->poll();
  if (!s.isOk() && comm->asyncError.load() == collSuccess) (void)markBroken(comm, std::move(s));
}

Status drainDevice(collComm_t comm) {
  if (!comm->deviceExecutor) return Status::ok();
  Status s = comm->deviceExecutor->drain();
  if (s.isOk()) return s;
  if (comm->asyncError.load() == collSuccess) return markBroken(comm, std::move(s));
  return s;
}

void stopDevice(collComm_t comm, bool abort) {
  if (!comm->deviceExecutor) return;
  if (abort) comm->deviceExecutor->abort();
  (void)comm->deviceExecutor->drain();  // a failure is the launch's, reported by poll()
}

}  // namespace coll
