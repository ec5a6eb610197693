#include "core/enqueue.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "algorithms/schedule.h"
#include "core/blame.h"
#include "core/call_check.h"
#include "core/comm.h"
#include "core/connections.h"
#include "core/host_stream.h"
#include "core/redop.h"
#include "core/window_path.h"
#include "device/runtime.h"
#include "exec/executor.h"
#include "kernels/cpu/reduce.h"

namespace coll {
namespace {

// How long a peer asked whom it waits for has to answer (core/blame.h).
constexpr int64_t kBlameAnswerMs = 1000;

bool isP2P(OpKind k) { return k == OpKind::kSend || k == OpKind::kRecv; }

}  // namespace

// The tuner's plan for this call, cached per collective (loops call one size over and over).
const algorithms::Plan& planFor(collComm_t comm, algorithms::Collective c, size_t bytes) {
  auto& last = comm->lastChoice[static_cast<int>(c)];
  if (last.bytes != bytes) {
    last.bytes = bytes;
    last.plan = choosePlan(comm, c, bytes);
  }
  return last.plan;
}

algorithms::Schedule buildFor(collComm_t comm, const OpArgs& a, algorithms::Collective c, const algorithms::Plan& plan,
                              size_t elem, size_t fifoBytes, size_t pieceBytes) {
  // The chunk never exceeds half the FIFO: the first send of a round must fit with room to spare
  // (see schedule.h).
  if (fifoBytes == 0) fifoBytes = static_cast<size_t>(comm->conns->fifoBytes());
  size_t chunk = std::min(plan.chunkBytes, fifoBytes / 2);
  // Pieces are cut from the chunk by the executor; a chunk of whole pieces has no short one.
  pieceBytes -= pieceBytes % elem;
  if (pieceBytes > 0 && chunk > pieceBytes) chunk -= chunk % pieceBytes;
  size_t chunkElems = std::max<size_t>(1, chunk / elem);
  algorithms::ScheduleArgs args{c, comm->nranks, comm->rank, a.count, a.root, chunkElems, comm->costModel.ranksPerHost};
  if (!comm->ringOrder.empty()) args.order = &comm->ringOrder;
  return algorithms::buildSchedule(plan.algorithm, args);
}

namespace {

// COLL_FAULT_INJECT=corrupt: flips the low bit of one element this rank's call wrote, so that
// result checkers can be shown to catch a wrong answer.
void corruptOne(const OpArgs& a, size_t elem, int rank) {
  if (a.kind == OpKind::kReduce && a.root != rank) return;  // wrote nothing
  static_cast<unsigned char*>(a.recvbuff)[(a.count - 1) * elem] ^= 1;
}

// A collRedOpCreatePreMulSum op: the whole input (count x bufferFactor elements) multiplied by
// this rank's scalar, read now, into a staging copy, which the collective then sums as collSum.
// An in-place call thus runs out of place from the copy into recvbuff, which is correct. Every
// reducing collective reads sendbuff on every rank, so every rank stages. Built-in ops: nothing.
Status stagePreMulSum(collComm_t comm, const OpArgs& a, exec::ExecArgs* args, std::unique_ptr<char[]>* staged) {
  if (!a.premul.inUse) return Status::ok();  // a built-in or bitwise op
  auto type = static_cast<collDataType_t>(a.type);
  alignas(8) unsigned char scalar[8];
  COLL_TRY(readScalar(a.premul, scalar));
  size_t n = a.count * bufferFactor(a.kind, comm->nranks);
  staged->reset(new char[n * kernels::typeSize(type)]);
  kernels::scale(staged->get(), a.sendbuff, n, type, scalar);
  args->input = staged->get();
  args->op = collSum;
  return Status::ok();
}

// Runs collective call a; pos: its position among its group's collectives (0 alone), for its
// in-band print; internal: a call coll makes itself (the full check's all-gather), which neither
// counts nor carries a print.
Status runCollective(collComm_t comm, const OpArgs& a, int pos = 0, bool internal = false) {
  auto type = static_cast<collDataType_t>(a.type);
  size_t elem = kernels::typeSize(type);
  algorithms::Collective c;
  if (!collectiveOf(a.kind, &c)) return Status::ok();
  auto& cached = comm->hostSchedule[static_cast<int>(c)];
  if (cached.count != a.count || cached.elem != elem || cached.root != a.root) {
    cached.count = ~size_t(0);  // invalid until rebuilt (buildFor may throw bad_alloc)
    cached.plan = planFor(comm, c, a.count * elem);
    cached.schedule = buildFor(comm, a, c, cached.plan, elem);
    cached.scratchElems = algorithms::scratchElems(cached.schedule);
    cached.linksGeneration = ~uint64_t(0);
    cached.windowGeneration = ~uint64_t(0);
    cached.count = a.count;
    cached.elem = elem;
    cached.root = a.root;
  }
  const algorithms::Plan& plan = cached.plan;
  if (comm->registrations.windows() > 0) {
    uint64_t generation = comm->registrations.generation();
    if (cached.windowGeneration != generation) {
      cached.windowGeneration = generation;
      cached.windowPath = preferWindows(comm, c, a.count * elem, plan);
    }
    bool ran = false;
    if (cached.windowPath) COLL_TRY(runOnWindows(comm, a, c, &ran));
    if (ran) {
      if (comm->corruptResults) corruptOne(a, elem, comm->rank);
      return Status::ok();
    }
  }
  const algorithms::Schedule& s = cached.schedule;
  if (s.empty()) return Status::ok();
  exec::Work work;
  WirePrint print;
  if (!internal) attachCallCheck(comm, a, pos, &print, &work.check);
  if (cached.linksGeneration != comm->conns->links().generation) {
    // Connections made for this call tell the peers its print (a mismatch ends there).
    COLL_TRY(comm->conns->ensureFor(s, 0, ConnectFor{work.check.print, a.name}));
    cached.linksGeneration = comm->conns->links().generation;
  }
  exec::ExecArgs args{a.sendbuff, a.recvbuff, type, static_cast<collRedOp_t>(a.op), comm->nranks};
  args.direct = plan.direct;
  std::unique_ptr<char[]> premul;
  COLL_TRY(stagePreMulSum(comm, a, &args, &premul));
  if (size_t need = cached.scratchElems * elem) {
    if (comm->scratch.size() < need) comm->scratch.resize(need);
    args.scratch = comm->scratch.data();
  }
  // The pairwise exchange overwrites blocks it has not sent yet when the buffers overlap: an
  // in-place all-to-all works from a copy of the input.
  std::vector<char> staged;
  size_t bytes = a.count * elem * static_cast<size_t>(comm->nranks);
  const char* in = static_cast<const char*>(a.sendbuff);
  const char* out = static_cast<const char*>(a.recvbuff);
  if (a.kind == OpKind::kAllToAll && in < out + bytes && out < in + bytes) {
    staged.assign(in, in + bytes);
    args.input = staged.data();
  }
  work.schedule = &s;
  work.args = args;
  work.opName = a.name;
  work.timeoutMs = a.timeoutMs;
  COLL_TRY(comm->executor->run(work, comm->conns->links()));
  if (comm->corruptResults) corruptOne(a, elem, comm->rank);
  return Status::ok();
}

Status runP2P(collComm_t comm, const OpArgs* ops, size_t n) {
  std::vector<exec::P2POp> p2p;
  std::vector<int> sendPeers, recvPeers;
  gatherP2P(ops, n, &p2p, &sendPeers, &recvPeers);
  if (p2p.empty()) return Status::ok();
  // E.g. an in-place ring shift: the send goes from a copy.
  std::vector<std::vector<char>> staged;
  for (auto& s : p2p) {
    if (!s.isSend || !sendOverlapsRecv(s, p2p)) continue;
    staged.emplace_back(s.buffer, s.buffer + s.bytes);
    s.buffer = staged.back().data();
  }
  COLL_TRY(comm->conns->ensure(sendPeers, recvPeers));
  exec::Work work;
  // The in-band check: the receiver compares each piece's print with its own (call_check.h).
  attachP2PPrints(comm, &p2p);
  if (comm->checkCalls != CallChecks::kOff) {
    work.check.rank = comm->rank;
    work.check.describe = describeMismatch;
  }
  work.p2p = &p2p;
  work.opName = ops[0].name;
  work.timeoutMs = groupTimeoutMs(ops, n);
  return comm->executor->run(work, comm->conns->links());
}

}  // namespace

void attachP2PPrints(collComm_t comm, std::vector<exec::P2POp>* ops) {
  if (comm->checkCalls == CallChecks::kOff) return;
  for (auto& op : *ops) {
    uint64_t& ordinal = (op.isSend ? comm->sendsTo : comm->recvsFrom)[static_cast<size_t>(op.peer)];
    WirePrint w = p2pPrint(op.bytes, ++ordinal);
    std::memcpy(op.print, &w, sizeof(op.print));
  }
}

void attachCallCheck(collComm_t comm, const OpArgs& a, int pos, WirePrint* print, exec::CallCheck* check) {
  if (comm->checkCalls == CallChecks::kOff) return;
  *print = wirePrint(a, comm->collectivesCalled, pos);
  check->print = print;
  check->id = comm->collectivesCalled;
  check->rank = comm->rank;
  check->describe = describeMismatch;
}

Status checkSameCall(collComm_t comm, const OpArgs& a) {
  CallPrint mine = callPrint(a, comm->collectivesCalled);
  std::vector<CallPrint> all(static_cast<size_t>(comm->nranks));
  OpArgs g{};
  g.kind = OpKind::kAllGather;
  g.name = a.name;
  g.sendbuff = &mine;
  g.recvbuff = all.data();
  g.count = sizeof(CallPrint);
  g.type = collUint8;
  g.op = collSum;
  g.root = -1;
  g.comm = comm;
  COLL_TRY(runCollective(comm, g, 0, true));
  std::string why = comparePrints(all.data(), comm->nranks);
  if (why.empty()) return Status::ok();
  return Status(collInvalidUsage, fmt::format("{}: {}", a.name, why));
}

namespace {

// Where a call's buffers are, given which of them it uses: sets a->onDevice, or says why the
// combination cannot run. Asked only where a device runtime exists (runtime() is nullptr on
// machines without devices, so host-only machines pay nothing per call).
Status placeBuffers(OpArgs* a, bool needSend, bool needRecv) {
  collComm_t comm = a->comm;
  HostStream* hostStream = HostStream::find(a->stream);
  device::Runtime* rt = device::runtime();
  int sendDev = -1, recvDev = -1;
  bool sendOn = rt && needSend && rt->isDeviceMemory(a->sendbuff, &sendDev);
  bool recvOn = rt && needRecv && rt->isDeviceMemory(a->recvbuff, &recvDev);
  if (!sendOn && !recvOn) {
    if (a->stream != nullptr && !hostStream)
      return COLL_ERROR(collInvalidArgument,
                        FMT_STRING("host buffers need a NULL stream or a live coll host stream "
                                   "(collHostStreamCreate); stream {} is neither"),
                        static_cast<const void*>(a->stream));
    return Status::ok();
  }
  const char* which = sendOn ? "sendbuff" : "recvbuff";
  int dev = sendOn ? sendDev : recvDev;
  if (comm->cudaDev < 0)
    return COLL_ERROR(collInvalidUsage,
                      FMT_STRING("{} is memory of device {}, but this communicator is host-only (made with cudaDev "
                                 "-1 or without a usable device)"),
                      which, dev);
  if ((needSend && !sendOn) || (needRecv && !recvOn))
    return COLL_ERROR(collInvalidUsage,
                      FMT_STRING("{} is device memory and {} is not: pass both buffers on the communicator's device "
                                 "({})"),
                      which, sendOn ? "recvbuff" : "sendbuff", comm->cudaDev);
  if ((sendOn && sendDev != comm->cudaDev) || (recvOn && recvDev != comm->cudaDev))
    return COLL_ERROR(collInvalidUsage, FMT_STRING("{} is memory of device {}, but this communicator is on device {}"),
                      sendOn && sendDev != comm->cudaDev ? "sendbuff" : "recvbuff",
                      sendOn && sendDev != comm->cudaDev ? sendDev : recvDev, comm->cudaDev);
  if (hostStream)
    return Status(collInvalidUsage, "device buffers go on a device stream (a cudaStream_t or NULL), not a host stream");
  if (!rt->isStream(a->stream))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("stream {} is not a live stream of the {} device runtime"),
                      static_cast<const void*>(a->stream), rt->name());
  // The device kernels load elements as their type (a misaligned float is a fault on the GPU, and
  // a byte-by-byte path for it would slow every kernel); sends and receives move bytes.
  size_t elem = isP2P(a->kind) ? 1 : kernels::typeSize(static_cast<collDataType_t>(a->type));
  for (const void* p : {needSend ? a->sendbuff : static_cast<const void*>(nullptr),
                        needRecv ? static_cast<const void*>(a->recvbuff) : nullptr})
    if (elem > 1 && reinterpret_cast<uintptr_t>(p) % elem != 0)
      return COLL_ERROR(collInvalidArgument,
                        FMT_STRING("{} {} is not aligned to its element type ({} bytes): device buffers must be"),
                        p == a->sendbuff ? "sendbuff" : "recvbuff", p, elem);
  a->onDevice = true;
  return Status::ok();
}

}  // namespace

void gatherP2P(const OpArgs* ops, size_t n, std::vector<exec::P2POp>* p2p, std::vector<int>* sendPeers,
               std::vector<int>* recvPeers) {
  for (const OpArgs* a = ops; a != ops + n; ++a) {
    if (!isP2P(a->kind) || a->count == 0) continue;
    bool send = a->kind == OpKind::kSend;
    size_t bytes = a->count * kernels::typeSize(static_cast<collDataType_t>(a->type));
    char* buf = send ? const_cast<char*>(static_cast<const char*>(a->sendbuff)) : static_cast<char*>(a->recvbuff);
    p2p->push_back({send, a->root, buf, bytes});  // to oneself too: a connection like any other
    (send ? sendPeers : recvPeers)->push_back(a->root);
  }
}

bool sendOverlapsRecv(const exec::P2POp& s, const std::vector<exec::P2POp>& p2p) {
  for (const auto& r : p2p)
    if (!r.isSend && s.buffer < r.buffer + r.bytes && r.buffer < s.buffer + s.bytes) return true;
  return false;
}

size_t bufferFactor(OpKind k, int nranks) {
  return (k == OpKind::kAllGather || k == OpKind::kReduceScatter || k == OpKind::kAllToAll) ? nranks : 1;
}

bool collectiveOf(OpKind kind, algorithms::Collective* out) {
  using algorithms::Collective;
  switch (kind) {
    case OpKind::kAllReduce:
      return *out = Collective::kAllReduce, true;
    case OpKind::kBroadcast:
      return *out = Collective::kBroadcast, true;
    case OpKind::kReduce:
      return *out = Collective::kReduce, true;
    case OpKind::kAllGather:
      return *out = Collective::kAllGather, true;
    case OpKind::kReduceScatter:
      return *out = Collective::kReduceScatter, true;
    case OpKind::kAllToAll:
      return *out = Collective::kAllToAll, true;
    case OpKind::kSend:
    case OpKind::kRecv:
      break;
  }
  return false;
}

algorithms::Plan choosePlan(const collComm* comm, algorithms::Collective c, size_t bytes) {
  algorithms::Plan p;
  p.algorithm = algorithms::algorithmsFor(c).front();
  p.chunkBytes = comm->costModel.chunkBytes;
  // setupTuning made sure that COLL_ALGO leaves every collective at least one algorithm.
  algorithms::choosePlan(c, comm->nranks, bytes, comm->costModel, comm->algoFilter, comm->proto, &p);
  return p;
}

int64_t groupTimeoutMs(const OpArgs* ops, size_t n) {
  int64_t t = 0;
  for (size_t i = 0; i < n; ++i) t = std::max(t, ops[i].timeoutMs);
  return t;
}

void snapshotRedOp(OpArgs* a) {
  bool reduces = a->kind == OpKind::kAllReduce || a->kind == OpKind::kReduce || a->kind == OpKind::kReduceScatter;
  if (!reduces) return;
  if (const PreMulSumOp* p = preMulSumOp(a->comm, a->op)) a->premul = *p;
}

Status checkTypeAndCount(int type, size_t count, size_t factor) {
  if (type < 0 || type >= collNumTypes)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("datatype {} is not a collDataType_t"), type);
  size_t elem = kernels::typeSize(static_cast<collDataType_t>(type));
  if (count > std::numeric_limits<size_t>::max() / elem / factor)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("count {} overflows the size of a buffer"), count);
  // x86-64 and AArch64 processes address 2^47 bytes (2^48 with 5-level pages, still far below
  // size_t): a larger buffer cannot exist, and reaching memcpy with its size would fault.
  constexpr size_t kAddressable = size_t(1) << 47;
  if (count * elem * factor > kAddressable)
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("count {} of {}-byte elements{} is {} bytes, more than a process can address "
                                 "(2^47)"),
                      count, elem, factor > 1 ? fmt::format(" (x {} blocks)", factor) : std::string(),
                      count * elem * factor);
  return Status::ok();
}

Status validate(OpArgs* op) {
  const OpArgs& a = *op;
  collComm_t comm = a.comm;
  COLL_TRY(checkReady(comm));
  op->timeoutMs = comm->timeoutMs.load(std::memory_order_relaxed);
  COLL_TRY(checkTypeAndCount(a.type, a.count, bufferFactor(a.kind, comm->nranks)));
  bool reduces = a.kind == OpKind::kAllReduce || a.kind == OpKind::kReduce || a.kind == OpKind::kReduceScatter;
  if (reduces) COLL_TRY(checkRedOp(comm, a.op, a.type));
  bool rooted = a.kind == OpKind::kBroadcast || a.kind == OpKind::kReduce;
  if ((rooted || isP2P(a.kind)) && (a.root < 0 || a.root >= comm->nranks))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("{} {} is not a rank of this {}-rank communicator"),
                      isP2P(a.kind) ? "peer" : "root", a.root, comm->nranks);
  // Which buffers this rank reads or writes (NCCL: broadcast's sendbuff and reduce's recvbuff
  // matter on the root only; send has no recvbuff, recv no sendbuff).
  bool needSend = a.count > 0 && a.kind != OpKind::kRecv && (a.kind != OpKind::kBroadcast || a.root == comm->rank);
  bool needRecv = a.count > 0 && a.kind != OpKind::kSend && (a.kind != OpKind::kReduce || a.root == comm->rank);
  if (needSend && !a.sendbuff)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("sendbuff is NULL with count {}"), a.count);
  if (needRecv && !a.recvbuff)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("recvbuff is NULL with count {}"), a.count);
  if (a.count == 0) {
    // Nothing moves; a device stream still makes it a device call (so that a group's parts agree).
    device::Runtime* rt = device::runtime();
    bool deviceStream = a.stream && !HostStream::find(a.stream) && rt && rt->isStream(a.stream);
    if (a.stream && !HostStream::find(a.stream) && !deviceStream)
      return COLL_ERROR(collInvalidArgument,
                        FMT_STRING("stream {} is neither NULL, a coll host stream nor a device stream"),
                        static_cast<const void*>(a.stream));
    op->onDevice = deviceStream && comm->cudaDev >= 0;
    return Status::ok();
  }
  return placeBuffers(op, needSend, needRecv);
}

Status runOps(collComm_t comm, const OpArgs* ops, size_t n) {
  WaitState& wait = *comm->waitState;
  uint64_t first = comm->flight ? comm->flight->start(ops, n) : 0;
  wait.waitingFor.store(-1, std::memory_order_relaxed);
  wait.opName.store(n == 0 ? "" : ops[0].name, std::memory_order_relaxed);
  if (n > 0 && comm->flight) wait.opSeq.store(first + n - 1, std::memory_order_relaxed);
  wait.inOp.store(true, std::memory_order_release);
  Status s;
  // A peer failed an earlier operation and said why (a mismatched call it saw, say): this rank's
  // operation could only wait for it, so it fails now with the peer's sentence.
  if (comm->bootstrap->failureNoticed()) s = Status(collRemoteError, comm->bootstrap->peerFailure(0));
  bool anyP2P = false;
  int pos = 0;  // among the group's collectives
  for (size_t i = 0; i < n && s.isOk(); ++i) {
    const OpArgs& a = ops[i];
    if (isP2P(a.kind)) {
      anyP2P = true;
      continue;
    }
    ++comm->collectivesCalled;  // numbers the call's fingerprints (from 1)
    if (comm->checkCalls == CallChecks::kFull) s = checkSameCall(comm, a);
    if (s.isOk()) s = runCollective(comm, a, pos++);
  }
  if (s.isOk() && anyP2P) s = runP2P(comm, ops, n);
  if (comm->flight) comm->flight->end(first, n, s.isOk());
  if (s.isOk()) {
    // For a live view (coll-top): what this rank's finished operations carried.
    wait.bytes.store(wait.bytes.load(std::memory_order_relaxed) + opBytes(ops, n), std::memory_order_relaxed);
    wait.inOp.store(false, std::memory_order_release);
    return s;
  }
  return failOperation(comm, std::move(s));
}

uint64_t opBytes(const OpArgs* ops, size_t n) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; ++i)
    bytes += ops[i].count * (isP2P(ops[i].kind) ? 1 : kernels::typeSize(static_cast<collDataType_t>(ops[i].type)));
  return bytes;
}

Status failOperation(collComm_t comm, Status s) {
  WaitState& wait = *comm->waitState;
  // inOp stays set, with whom the operation waited for: a peer following the chain of waits
  // must see this rank as stuck on that peer, not as idle.
  if (s.code() == collTimeout && !comm->abortFlag.load()) {
    std::string chain = findStalledRank(comm, wait.waitingFor.load(), kBlameAnswerMs);
    if (!chain.empty()) s = Status(collTimeout, s.message() + "; " + chain);
  }
  // FIFO positions are no longer consistent between the ranks: the communicator cannot go on,
  // and the peers should hear why rather than time out.
  if (!comm->abortFlag.load()) s = comm->bootstrap->shareFailure(std::move(s));
  if (comm->flight) comm->flight->dump(s.message());
  // The sentence before the state: a caller polling collCommGetAsyncError (a non-blocking
  // communicator) may ask collGetLastError the moment it sees the failure.
  {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    if (comm->firstError.empty()) comm->firstError = s.message();
    comm->lastError = s.message();
  }
  comm->asyncError.store(s.code());
  return s;
}

}  // namespace coll
