#include "exec/cuda/host_threads.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <tuple>

#include "base/host_id.h"
#include "base/params.h"
#include "exec/cuda/dispatch.h"
#include "exec/cuda/host_team.h"

namespace coll::exec::dev {

// The kernels' print is the transports' (dev_work.h): the same bytes over every path.
static_assert(kPrintBytes == transport::kPrintBytes && kPrintMagic == transport::kPrintMagic,
              "the device print is transport/fifo.h's");

// The interpreter's codes are the schedule's enums: one list, two spellings.
static_assert(static_cast<int>(algorithms::Prim::kSend) == kSend, "primitive codes");
static_assert(static_cast<int>(algorithms::Prim::kRecvReduceCopySend) == kRecvReduceCopySend, "primitive codes");
static_assert(static_cast<int>(algorithms::Prim::kSendRecvReduce) == kSendRecvReduce, "primitive codes");
static_assert(static_cast<int>(algorithms::Buf::kScratch) == kScratch, "buffer codes");
static_assert(sizeof(LLLine) == transport::kLLLineBytes, "the LL region's lines are the interpreter's");

std::vector<DevStep> toDevSteps(const algorithms::Schedule& schedule) {
  std::vector<DevStep> out;
  out.reserve(schedule.size());
  for (const algorithms::Step& st : schedule) {
    DevStep d{};
    d.prim = static_cast<uint8_t>(st.prim);
    d.src = static_cast<uint8_t>(st.src);
    d.dst = static_cast<uint8_t>(st.dst);
    d.final = st.final ? 1 : 0;
    d.sendPeer = st.sendPeer;
    d.recvPeer = st.recvPeer;
    d.srcOff = st.srcOff;
    d.dstOff = st.dstOff;
    d.count = st.count;
    d.recvCount = st.recvElems();
    out.push_back(d);
  }
  return out;
}

DevPort portOf(const transport::ConnInfo& info) {
  DevPort port;
  transport::FifoHeader* h = info.fifo.header;
  // The counters are lock-free 8-byte atomics: the interpreter's own atomic loads and stores
  // (portable.h) work on the same words.
  port.fifo.head = reinterpret_cast<uint64_t*>(&h->head);
  port.fifo.tail = reinterpret_cast<uint64_t*>(&h->tail);
  port.fifo.sizes = h->sizes;
  port.fifo.slots = info.fifo.slots;
  port.fifo.nslots = info.fifo.nslots;
  port.fifo.slotBytes = info.fifo.slotBytes;
  port.fifo.llSlots = reinterpret_cast<LLLine*>(info.fifo.ll);
  port.fifo.llSlotLines = info.fifo.llLines;
  port.peer = info.peer;
  return port;
}

std::vector<ChannelWorks> p2pChannels(const std::vector<P2POp>& ops, const DevWork& base) {
  std::vector<ChannelWorks> out;
  std::map<std::tuple<int, bool, int>, size_t> index;  // (peer, send, channel) -> out's entry
  for (const P2POp& op : ops) {
    if (op.bytes == 0) continue;
    auto [at, added] = index.emplace(std::make_tuple(op.peer, op.isSend, op.channel), out.size());
    if (added) {
      out.emplace_back();
      out.back().channel = op.channel;
    }
    ChannelWorks& c = out[at->second];
    DevStep st{};
    st.prim = op.isSend ? kSend : kRecv;
    st.src = kInput;
    st.dst = kOutput;
    st.sendPeer = op.isSend ? op.peer : -1;
    st.recvPeer = op.isSend ? -1 : op.peer;
    st.count = op.bytes;
    c.steps.push_back({st});
    DevWork dw = base;
    dw.type = collInt8;
    dw.op = collSum;
    dw.input = op.buffer;
    dw.output = op.buffer;
    std::memcpy(dw.print, op.print, sizeof(dw.print));  // all zero: the check is off
    if (op.ll) dw.proto = kLL;
    c.works.push_back(dw);
  }
  return out;
}

namespace {
std::atomic<uint64_t> setupReads{0}, pieceReads{0}, piecesMoved{0};
}  // namespace

void countDescriptorReads(uint64_t setup, uint64_t inPiece, uint64_t pieces) {
  if (setup) setupReads.fetch_add(setup, std::memory_order_relaxed);
  if (inPiece) pieceReads.fetch_add(inPiece, std::memory_order_relaxed);
  if (pieces) piecesMoved.fetch_add(pieces, std::memory_order_relaxed);
}

DescriptorCounters descriptorCounters() {
  return {setupReads.load(std::memory_order_relaxed), pieceReads.load(std::memory_order_relaxed),
          piecesMoved.load(std::memory_order_relaxed)};
}

int hostCtaThreads() {
  int64_t n = params::kDeviceEmulationThreads.get();  // validated at init; unit tests may call first
  if (params::kDeviceEmulationThreads.source() == param::Source::kDefault) {
    // Unless a test asks for a size, a team follows the cores this process may run on: more
    // threads than cores only take turns at every barrier.
    static const int64_t cores = std::max<int64_t>(1, usableCores());
    n = std::min(n, cores);
  }
  return static_cast<int>(n < 1 ? 1 : (n > 64 ? 64 : n));
}

bool runChannelOnHost(const DevWork& w) { return runWorksOnHost(DevChannel{&w, 1}); }

bool runWorksOnHost(const DevChannel& c) {
  // Every thread of the team ends with the same answer.
  return runOnTeam(hostCtaThreads(), [&c](HostTeam& team, int id) {
    HostGroup g{&team, id};
    timingBegin(team.shared, g);
    for (int i = 0; i < c.nworks; ++i)
      if (!runChannel(c.works[i], team.shared, g)) return false;  // as the kernel: no timing then
    // run()'s last barrier ordered every thread's counts before this, as in the kernel.
    if (g.leader()) timingEnd(team.shared, c.nworks > 0 ? team.shared.work.result : nullptr);
    return true;
  });
}

Status failureStatus(const DevResult& r, const char* opName, const std::string& peerWhere,
                     decltype(CallCheck::describe) describeCall, int rank) {
  // A FIFO's print mismatch names both calls (a window's has no prints to show: theirs is 0).
  if (r.code == DevResult::kCallMismatch && r.theirs[0] != 0 && describeCall)
    return COLL_ERROR(collInvalidUsage, FMT_STRING("{}"), describeCall(r.mine, r.theirs, rank, r.peer, opName));
  std::string what = describe(r, opName, peerWhere);
  switch (r.code) {
    case DevResult::kOk:
      return Status::ok();
    case DevResult::kTimeout:
      return COLL_ERROR(
          collTimeout,
          FMT_STRING("{} (COLL_TIMEOUT_MS, config.timeoutMs or collCommSetTimeout): it stalled, died, or called a "
                     "different operation or count"),
          what);
    case DevResult::kSizeMismatch:
    case DevResult::kCallMismatch:
      return COLL_ERROR(collInvalidUsage, FMT_STRING("{}"), what);
    case DevResult::kAborted:
      return COLL_ERROR(collRemoteError, FMT_STRING("{}"), what);
    default:
      return COLL_ERROR(collInternalError, FMT_STRING("{}"), what);
  }
}

std::string describe(const DevResult& r, const char* opName, const std::string& peerWhere) {
  std::string at = std::string(opName) + " (device step " + std::to_string(r.step) + ")";
  std::string peer = "rank " + std::to_string(r.peer) + peerWhere;
  switch (r.code) {
    case DevResult::kOk:
      return "";
    case DevResult::kAborted:
      return at + " was aborted while waiting for " + peer;
    case DevResult::kTimeout:
      return at + ": nothing moved within the timeout waiting for " + peer;
    case DevResult::kSizeMismatch:
      return at + ": " + peer + " sent a piece of " + std::to_string(r.got) + " bytes where " + std::to_string(r.want) +
             " were expected: the ranks called it with different counts or types";
    case DevResult::kCallMismatch:
      if (r.theirs[0] != 0)
        return at + ": " + peer + " made another call (the prints of the two calls differ; COLL_CHECK_CALLS)";
      return std::string(opName) + " on windows: " + peer +
             " called another collective, type, op, count or root, or its buffers lie at other offsets of "
             "other windows (a collective on symmetric windows needs the same offsets on every rank)";
    default:
      return at + ": a step the interpreter cannot run (bad primitive, type, op or missing connection to " + peer + ")";
  }
}

}  // namespace coll::exec::dev
