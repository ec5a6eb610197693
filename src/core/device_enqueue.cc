#include "core/device_enqueue.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <set>
#include <tuple>

#include "algorithms/channels.h"
#include "algorithms/schedule.h"
#include "base/params.h"
#include "core/call_check.h"
#include "core/comm.h"
#include "core/connections.h"
#include "core/device_window_path.h"
#include "core/enqueue.h"
#include "core/redop.h"
#include "core/residency.h"
#include "device/runtime.h"
#include "exec/cuda/device_executor.h"
#include "kernels/cpu/reduce.h"
#include "transport/transport.h"

namespace coll {
namespace {

bool isP2P(OpKind k) { return k == OpKind::kSend || k == OpKind::kRecv; }

// The failure that breaks comm, through the host path's failure path (blame for a timeout, the
// peers told, the flight recorder written, the first error kept, the async error set); it is
// also what collGetLastError(comm) says after collCommGetAsyncError.
Status markBroken(collComm_t comm, Status s) {
  s = failOperation(comm, std::move(s));
  std::lock_guard<std::mutex> lock(comm->errorMutex);
  comm->lastError = s.message();
  return s;
}

// A device call's operations are done (the executor reaped its last launch; LaunchDone): their
// flight-recorder entries end, their bytes count, and the live view shows the communicator idle
// unless another operation started since. On the thread that reaped, with the executor's lock.
void deviceOpsDone(collComm_t comm, const exec::LaunchTag& tag, bool ok) {
  if (comm->flight) comm->flight->endElsewhere(tag.first, tag.n, ok);
  if (!ok) return;  // the failure's path (markBroken) follows from poll()
  WaitState& wait = *comm->waitState;
  wait.deviceBytes.store(wait.deviceBytes.load(std::memory_order_relaxed) + tag.bytes, std::memory_order_relaxed);
  if (wait.opSeq.load(std::memory_order_relaxed) == tag.first + tag.n - 1) {
    wait.progressed();
    wait.inOp.store(false, std::memory_order_release);
  }
}

// A device call starts: its operations enter the flight recorder and the live view (coll-top)
// as the host path's do in runOps; the tag it returns ends them when its launches are done.
exec::LaunchTag startDeviceOps(collComm_t comm, const std::vector<OpArgs>& ops) {
  exec::LaunchTag tag;
  tag.n = ops.size();
  tag.bytes = opBytes(ops.data(), ops.size());
  tag.first = comm->flight ? comm->flight->start(ops.data(), ops.size()) : 0;
  WaitState& wait = *comm->waitState;
  wait.progressed();
  wait.opName.store(ops.front().name, std::memory_order_relaxed);
  if (tag.first) wait.opSeq.store(tag.first + tag.n - 1, std::memory_order_relaxed);
  wait.inOp.store(true, std::memory_order_release);
  return tag;
}

Status ensureDevicePath(collComm_t comm) {
  if (comm->deviceExecutor) return Status::ok();
  device::Runtime* rt = device::runtime();
  if (!rt) return Status(collInternalError, "a device call was accepted but there is no device runtime");
  // Every rank computes the same budget from the same table, so channel splits agree.
  CtaBudget budget = ctaBudget(comm->bootstrap->peers());
  if (budget.known && budget.perRank == 0)
    return Status(collInvalidUsage, residencyProblem("the first device call", 1, budget));
  auto conns = std::make_unique<Connections>(comm, /*device=*/true);
  auto executor = std::make_unique<exec::DeviceExecutor>(*rt, comm->nranks, comm->cudaDev);
  COLL_TRY(executor->init());
  // The executor lives in comm and is destroyed before it.
  executor->setLaunchDone([comm](const exec::LaunchTag& tag, bool ok) { deviceOpsDone(comm, tag, ok); });
  executor->setCallCheck(comm->rank, describeMismatch);  // a kernel's kCallMismatch in words
  conns->setLinksGuard(&executor->linksMutex());
  // The same answer on every rank: the ranks' infos are shared and COLL_* must agree anyway.
  size_t llMax = static_cast<size_t>(std::max<int64_t>(0, params::kDeviceLLMax.get()));
  size_t deviceLLMax = comm->proto.ll && transport::deviceLLEverywhere(comm->bootstrap->peers()) ? llMax : 0;
  // Under errorMutex: collCommGetAsyncError may look for the executor from another thread.
  std::lock_guard<std::mutex> lock(comm->errorMutex);
  comm->deviceConns = std::move(conns);
  comm->deviceExecutor = std::move(executor);
  comm->deviceLLMax = deviceLLMax;
  comm->deviceMaxChannels = static_cast<int>(params::kDeviceNChannels.get());
  if (budget.known) comm->deviceMaxChannels = std::min(comm->deviceMaxChannels, budget.perRank);
  comm->deviceCtaBudget = budget;
  comm->deviceChannelMinBytes = static_cast<size_t>(params::kDeviceChannelMinBytes.get());
  return Status::ok();
}

// Slices start at multiples of this many bytes, so that a channel's vector loads stay aligned
// where the buffer is.
constexpr size_t kSliceAlignBytes = 256;

// One channel's share of a collective (algorithms/channels.h): the plan's schedule for the
// slice's count, re-addressed into the caller's blocks, over the channel's connections, with the
// buffers advanced to the slice and a scratch of the channel's own.
Status channelWork(collComm_t comm, const OpArgs& a, algorithms::Collective c, const algorithms::Plan& plan,
                   const exec::ExecArgs& args, int channel, int channels, const exec::CallCheck& check,
                   std::vector<std::unique_ptr<algorithms::Schedule>>* schedules, std::vector<exec::Work>* works) {
  size_t elem = kernels::typeSize(args.type);
  algorithms::Slice slice = algorithms::channelSlice(a.count, channel, channels, kSliceAlignBytes / elem);
  if (slice.count == 0) return Status::ok();
  OpArgs part = a;
  part.count = slice.count;
  // What the FIFO's pieces hold (each slot keeps room for a call print): a chunk of half of it is
  // at most half the slots' pieces, as schedule.h's rounds need.
  size_t piece = comm->deviceConns->pieceBytes(args.ll);
  size_t fifoBytes = piece * static_cast<size_t>(comm->deviceConns->nslots());
  auto s = std::make_unique<algorithms::Schedule>(buildFor(comm, part, c, plan, elem, fifoBytes, piece));
  if (s->empty()) return Status::ok();
  if (!algorithms::spreadOverBlocks(s.get(), c, slice.count, a.count))
    return COLL_ERROR(collInternalError, FMT_STRING("{}: the {} schedule cannot run on a slice of each block"), a.name,
                      algorithms::algorithmName(plan.algorithm));
  // Connections made for this call tell the peers its print (a mismatch ends there).
  COLL_TRY(comm->deviceConns->ensureFor(*s, channel, ConnectFor{check.print, a.name}));
  exec::Work w;
  w.check = check;
  w.schedule = s.get();
  w.opName = a.name;
  w.channel = channel;
  w.timeoutMs = a.timeoutMs;
  w.args = args;
  // Broadcast's input and reduce's output may be null off the root: nothing to advance then.
  size_t skip = slice.lo * elem;
  if (args.input) w.args.input = static_cast<const char*>(args.input) + skip;
  if (args.output) w.args.output = static_cast<char*>(args.output) + skip;
  if (size_t need = algorithms::scratchElems(*s) * elem) {
    COLL_ASSIGN_OR_RETURN(w.args.scratch, comm->deviceExecutor->scratch(need, channel, a.stream));
  }
  schedules->push_back(std::move(s));
  works->push_back(w);
  return Status::ok();
}

// A collective's works, one per channel it is split across: their schedules (kept alive in
// *schedules until the launch is built), buffers, and what they need staged. print: where the
// call's in-band print is kept until the launch is built (pos: the call's place in its group).
Status collectiveWork(collComm_t comm, const OpArgs& a, int pos, WirePrint* print,
                      std::vector<std::unique_ptr<algorithms::Schedule>>* schedules,
                      std::vector<std::unique_ptr<exec::dev::DevWindow>>* windows, std::vector<exec::Work>* works) {
  algorithms::Collective c;
  if (!collectiveOf(a.kind, &c) || a.count == 0) return Status::ok();
  if (comm->registrations.windows() > 0) {
    bool taken = false;
    COLL_TRY(deviceWindowWork(comm, a, c, windows, works, &taken));
    if (taken) return Status::ok();
  }
  auto type = static_cast<collDataType_t>(a.type);
  size_t elem = kernels::typeSize(type);
  exec::ExecArgs args{a.sendbuff, a.recvbuff, type, static_cast<collRedOp_t>(a.op), comm->nranks};
  args.direct = false;
  // Collectives that only move data share the sum kernel of their type (there is one device
  // kernel per type and op), whatever op the call carried.
  bool reduces = c == algorithms::Collective::kAllReduce || c == algorithms::Collective::kReduceScatter ||
                 c == algorithms::Collective::kReduce;
  if (!reduces) args.op = collSum;
  // LL FIFOs hold half the data of Simple ones (8 of every 16 bytes): the schedule's chunk follows.
  args.ll = a.count * elem <= comm->deviceLLMax;
  if (a.premul.inUse) {
    // The interpreter scales inputs as it reads them. A collScalarDevice scalar in device memory
    // is read by the kernel at each run (a captured graph's replays see its current value, as
    // with NCCL); one in host memory, which a kernel cannot read, is read here, at enqueue.
    args.premul = true;
    args.op = collSum;
    device::Runtime* rt = device::runtime();
    int dev = -1;
    if (a.premul.residence == collScalarDevice && rt && rt->isDeviceMemory(a.premul.pointer, &dev) &&
        dev == comm->cudaDev) {
      args.scalarPtr = a.premul.pointer;
    } else {
      alignas(8) unsigned char scalar[8] = {};
      COLL_TRY(readScalar(a.premul, scalar));
      std::memcpy(&args.scalar, scalar, elem);
    }
  }
  // The pairwise exchange overwrites blocks it has not sent yet when the buffers overlap.
  size_t bytes = a.count * elem * bufferFactor(a.kind, comm->nranks);
  const char* in = static_cast<const char*>(a.sendbuff);
  const char* out = static_cast<const char*>(a.recvbuff);
  if (a.kind == OpKind::kAllToAll && in < out + bytes && out < in + bytes) {
    COLL_ASSIGN_OR_RETURN(args.input, comm->deviceExecutor->stage(a.sendbuff, bytes, a.stream));
  }
  // The plan of the whole operation; its algorithm runs on every channel's slice.
  const algorithms::Plan& plan = planFor(comm, c, a.count * elem);
  int channels = 1;
  if (algorithms::slicesAcrossChannels(plan.algorithm, c))
    channels = algorithms::channelsFor(bytes, comm->deviceMaxChannels, comm->deviceChannelMinBytes);
  exec::CallCheck check;
  attachCallCheck(comm, a, pos, print, &check);
  for (int ch = 0; ch < channels; ++ch)
    COLL_TRY(channelWork(comm, a, c, plan, args, ch, channels, check, schedules, works));
  return Status::ok();
}

// A group's sends and receives, each split across channels as a collective of its size would be
// (both ends see the same byte count, so they split alike); the parts of one (peer, direction,
// channel) keep their posting order.
Status enqueueP2P(collComm_t comm, const std::vector<OpArgs>& ops, exec::LaunchTag tag) {
  std::vector<exec::P2POp> whole;
  std::vector<int> sendPeers, recvPeers;
  gatherP2P(ops.data(), ops.size(), &whole, &sendPeers, &recvPeers);
  if (whole.empty()) return Status::ok();  // the caller tells tag's end
  exec::DeviceExecutor& ex = *comm->deviceExecutor;
  attachP2PPrints(comm, &whole);  // the in-band check, as the host path's: every channel's part carries it
  std::vector<exec::P2POp> p2p;
  std::vector<std::vector<int>> sendOn(algorithms::kMaxChannels), recvOn(algorithms::kMaxChannels);
  for (auto& s : whole) {
    s.ll = s.bytes <= comm->deviceLLMax;  // the receiver posts the same count: the same choice
    if (s.isSend && sendOverlapsRecv(s, whole)) {
      COLL_ASSIGN_OR_RETURN(void* copy, ex.stage(s.buffer, s.bytes, ops.front().stream));
      s.buffer = static_cast<char*>(copy);
    }
    int channels =
        p2pChannels(s.bytes, comm->nranks, comm->deviceMaxChannels, comm->deviceChannelMinBytes, comm->deviceCtaBudget);
    for (int ch = 0; ch < channels; ++ch) {
      algorithms::Slice slice = algorithms::channelSlice(s.bytes, ch, channels, kSliceAlignBytes);
      if (slice.count == 0) continue;
      exec::P2POp part = s;
      part.buffer = s.buffer + slice.lo;
      part.bytes = slice.count;
      part.channel = ch;
      p2p.push_back(part);
      (s.isSend ? sendOn : recvOn)[ch].push_back(s.peer);
    }
  }
  // One CTA per (peer, direction, channel): refused before anything is launched or connected when
  // the ranks sharing a GPU could not all run at once.
  std::set<std::tuple<int, bool, int>> ctas;
  for (const exec::P2POp& part : p2p) ctas.emplace(part.peer, part.isSend, part.channel);
  std::string problem = residencyProblem(ops.front().name, static_cast<int>(ctas.size()), comm->deviceCtaBudget);
  if (!problem.empty()) return Status(collInvalidUsage, problem);
  // Channel by channel, in the same order on every rank (Connections::ensure is collective).
  for (int ch = 0; ch < algorithms::kMaxChannels; ++ch)
    if (!sendOn[ch].empty() || !recvOn[ch].empty()) COLL_TRY(comm->deviceConns->ensure(sendOn[ch], recvOn[ch], ch));
  return ex.enqueue({}, &p2p, comm->deviceConns->links(), ops.front().stream, ops.front().name,
                    groupTimeoutMs(ops.data(), ops.size()), tag);
}

}  // namespace

Status enqueueDevice(collComm_t comm, const std::vector<OpArgs>& ops) {
  if (ops.empty()) return Status::ok();
  COLL_TRY(ensureDevicePath(comm));
  Status s = comm->deviceExecutor->poll();
  // A peer failed an earlier operation and said why (a mismatched call it saw, say): this call
  // could only wait for it, so it fails now with the peer's sentence, as the host path's does.
  if (s.isOk() && comm->bootstrap->failureNoticed()) s = Status(collRemoteError, comm->bootstrap->peerFailure(0));
  if (!s.isOk()) return markBroken(comm, std::move(s));
  exec::LaunchTag tag = startDeviceOps(comm, ops);
  std::vector<std::unique_ptr<algorithms::Schedule>> schedules;
  std::vector<std::unique_ptr<exec::dev::DevWindow>> windows;
  std::vector<exec::Work> works;
  bool p2p = false;              // the sends and receives launch last: they carry the tag
  std::deque<WirePrint> prints;  // the collectives' in-band prints, at fixed places until launched
  int pos = 0;                   // among the group's collectives
  for (const auto& a : ops) {
    if (!s.isOk()) break;
    if (!isP2P(a.kind)) {
      ++comm->collectivesCalled;  // numbers the call's fingerprints, as the host path's runOps does
      if (comm->checkCalls == CallChecks::kFull) s = checkSameCall(comm, a);
      prints.emplace_back();
      if (s.isOk()) s = collectiveWork(comm, a, pos++, &prints.back(), &schedules, &windows, &works);
    } else {
      p2p = p2p || a.count > 0;
    }
  }
  if (s.isOk() && !works.empty())
    s = comm->deviceExecutor->enqueue(works, nullptr, comm->deviceConns->links(), ops.front().stream,
                                      works.front().opName, groupTimeoutMs(ops.data(), ops.size()),
                                      p2p ? exec::LaunchTag{} : tag);
  if (s.isOk() && p2p) s = enqueueP2P(comm, ops, tag);
  if (s.isOk() && works.empty() && !p2p) deviceOpsDone(comm, tag, true);  // nothing to launch
  if (s.isOk()) return s;
  if (comm->flight && tag.first) comm->flight->endElsewhere(tag.first, tag.n, false);
  return markBroken(comm, std::move(s));
}

Status enqueueDeviceWork(collComm_t comm, const exec::Work& work, collStream_t stream) {
  COLL_TRY(ensureDevicePath(comm));
  Status s = comm->deviceExecutor->poll();
  if (s.isOk())
    s = comm->deviceExecutor->enqueue({work}, nullptr, comm->deviceConns->links(), stream, work.opName, work.timeoutMs);
  if (s.isOk()) return s;
  return markBroken(comm, std::move(s));
}

namespace {

// comm's device executor, or null before its first device call. Under errorMutex: the first
// device call makes it (ensureDevicePath) while another thread may ask (collCommGetAsyncError).
exec::DeviceExecutor* executorOf(collComm_t comm) {
  std::lock_guard<std::mutex> lock(comm->errorMutex);
  return comm->deviceExecutor.get();
}

}  // namespace

void pollDevice(collComm_t comm) {
  exec::DeviceExecutor* ex = executorOf(comm);
  if (!ex) return;
  Status s = ex->poll();
  if (!s.isOk() && comm->asyncError.load() == collSuccess) (void)markBroken(comm, std::move(s));
}

void deviceTimings(collComm_t comm, collDeviceTimings_t* out) {
  *out = collDeviceTimings_t{};
  if (exec::DeviceExecutor* ex = executorOf(comm)) *out = ex->takeTimings();
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

Status releaseDeviceMemory(collComm_t comm) {
  exec::DeviceExecutor* ex = executorOf(comm);
  return ex ? ex->releaseMemory() : Status::ok();
}

void deviceMemory(collComm_t comm, size_t* scratch, size_t* fifos) {
  exec::DeviceExecutor* ex = executorOf(comm);
  *scratch = ex ? ex->scratchBytes() : 0;
  // The connections are made with the executor (ensureDevicePath), under the same lock.
  *fifos = ex ? comm->deviceConns->deviceBytes() : 0;
}

}  // namespace coll
