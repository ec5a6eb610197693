#include "core/device_window_path.h"

#include <algorithm>

#include "algorithms/channels.h"
#include "core/comm.h"
#include "core/registration.h"
#include "core/window_path.h"
#include "device/runtime.h"
#include "exec/window/window.h"
#include "kernels/cpu/reduce.h"

namespace coll {

using algorithms::Collective;
using exec::dev::DevArrival;
using exec::dev::DevWindow;
using exec::dev::DevWindowMove;
using exec::dev::kWindowMaxRanks;

namespace {

constexpr int kChannels = algorithms::kMaxChannels;

size_t areaBytes(int nranks) {
  return static_cast<size_t>(kChannels) * (static_cast<size_t>(nranks) * sizeof(DevArrival) + sizeof(uint64_t));
}

// Rank-independent slices start at multiples of this many bytes (as the schedules' channel
// slices do), so that every channel's packs stay aligned where the buffers are.
constexpr size_t kSliceAlignBytes = 256;

// A 64-bit mix of the call and where its buffers are: equal on every rank exactly when the ranks
// made the same call on the same windows at the same offsets.
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

// The symmetric device window every rank maps that holds [p, p + bytes), or nullptr; *offset: p's
// place in it.
const Registration* deviceWindow(collComm* comm, const void* p, size_t bytes, size_t* offset) {
  const Registration* r = comm->registrations.windowHolding(p, bytes, offset);
  return r && (r->flags & COLL_WIN_COLL_SYMMETRIC) && r->peers->allPointers && r->peers->device ? r : nullptr;
}

// Rank p's buffer at offset of window w, as this rank maps it.
char* peerAt(const Registration* w, int p, size_t offset) {
  return w->peers->ranks[static_cast<size_t>(p)].base + offset;
}

// Whether rank p's part of window w holds bytes at offset.
bool fits(const Registration* w, int p, size_t offset, size_t bytes) {
  size_t size = w->peers->ranks[static_cast<size_t>(p)].size;
  return offset <= size && bytes <= size - offset;
}

// This channel's share [lo, lo + count) of a move of n elements.
algorithms::Slice sliceOf(size_t n, int channel, int channels, size_t elem) {
  return algorithms::channelSlice(n, channel, channels, std::max<size_t>(1, kSliceAlignBytes / elem));
}

// One move whose pointers all advance by the channel's slice of its n elements.
void addMove(DevWindow* w, const char* const* src, int nsrc, char* const* dst, int ndst, size_t n, size_t elem,
             int channel, int channels) {
  algorithms::Slice s = sliceOf(n, channel, channels, elem);
  DevWindowMove& m = w->moves[w->nmoves++];
  m.nsrc = nsrc;
  m.ndst = ndst;
  m.count = s.count;
  for (int i = 0; i < nsrc; ++i) m.src[i] = src[i] + s.lo * elem;
  for (int i = 0; i < ndst; ++i) m.dst[i] = dst[i] + s.lo * elem;
}

}  // namespace

Result<std::unique_ptr<DeviceWindowArrivals>> DeviceWindowArrivals::create(collComm* comm) {
  std::unique_ptr<DeviceWindowArrivals> w(new DeviceWindowArrivals());
  w->nranks_ = comm->nranks;
  w->rank_ = comm->rank;
  device::Runtime* rt = device::runtime();
  // Every rank calls exchangeRanges (it is collective), with an empty range where it has no area.
  size_t bytes = 0;
  if (rt && comm->cudaDev >= 0) {
    bytes = areaBytes(comm->nranks);
    Status s = rt->alloc(comm->cudaDev, bytes, &w->own_);  // zeroed
    if (!s.isOk()) {
      COLL_LOG(WARN, INIT, "rank {}: no device memory for the arrivals of collectives on windows: {}", comm->rank,
               s.message());
      w->own_ = nullptr;
      bytes = 0;
    }
  }
  COLL_ASSIGN_OR_RETURN(w->areas_, exchangeRanges(comm, w->own_, bytes));
  return w;
}

DeviceWindowArrivals::~DeviceWindowArrivals() {
  areas_.reset();  // the peers' mappings first
  if (own_) device::runtime()->free(own_);
}

DevArrival* DeviceWindowArrivals::at(int peer, int channel) const {
  auto* area = reinterpret_cast<DevArrival*>(areas_->ranks[static_cast<size_t>(peer)].base);
  return area + static_cast<size_t>(channel) * static_cast<size_t>(nranks_) + static_cast<size_t>(rank_);
}

const DevArrival* DeviceWindowArrivals::own(int channel) const {
  return static_cast<const DevArrival*>(own_) + static_cast<size_t>(channel) * static_cast<size_t>(nranks_);
}

uint64_t* DeviceWindowArrivals::epoch(int channel) const {
  auto* counters = reinterpret_cast<uint64_t*>(static_cast<DevArrival*>(own_) + kChannels * nranks_);
  return counters + channel;
}

Status deviceWindowWork(collComm* comm, const OpArgs& a, Collective c, std::vector<std::unique_ptr<DevWindow>>* windows,
                        std::vector<exec::Work>* works, bool* taken) {
  *taken = false;
  DeviceWindowArrivals* arrivals = comm->deviceWindowArrivals.get();
  int n = comm->nranks, me = comm->rank;
  if (!arrivals || !arrivals->usable() || n < 2 || n > kWindowMaxRanks || a.count == 0 || a.premul.inUse ||
      !comm->algoFilter.permitsWindow(c))
    return Status::ok();
  auto type = static_cast<collDataType_t>(a.type);
  size_t elem = kernels::typeSize(type), block = a.count * elem, nn = static_cast<size_t>(n);
  bool inBlocks = c == Collective::kReduceScatter || c == Collective::kAllToAll;
  bool outBlocks = c == Collective::kAllGather || c == Collective::kAllToAll;
  size_t inBytes = inBlocks ? block * nn : block, outBytes = outBlocks ? block * nn : block;
  // Reduce keeps the FIFOs: its result goes to the root's output, whose place the other ranks
  // cannot know (NCCL lets them pass any recvbuff, even NULL, so they cannot assume the root's is
  // where theirs is), and a decision that differs between ranks would leave some waiting.
  if (c == Collective::kReduce) return Status::ok();
  // The buffers every rank's peers reach (the same kinds on every rank: the fingerprint covers
  // them). Broadcast: every rank's output, the root's included; the root's input is copied into
  // its output first when it differs (below), so that every rank decides from its output alone.
  bool needIn = c == Collective::kAllReduce || c == Collective::kReduceScatter;
  bool needOut = c != Collective::kReduceScatter;
  size_t inOff = 0, outOff = 0;
  const Registration* inWin = needIn ? deviceWindow(comm, a.sendbuff, inBytes, &inOff) : nullptr;
  const Registration* outWin = needOut ? deviceWindow(comm, a.recvbuff, outBytes, &outOff) : nullptr;
  if ((needIn && !inWin) || (needOut && !outWin)) return Status::ok();
  // Every rank's window must hold the buffer at this offset (the fingerprint checks that the
  // offsets agree; the sizes are known to all, so every rank with the same offsets decides alike).
  for (int p = 0; p < n; ++p) {
    if (inWin && !fits(inWin, p, inOff, inBytes)) return Status::ok();
    if (outWin && !fits(outWin, p, outOff, outBytes)) return Status::ok();
  }
  if (c != Collective::kBroadcast && !windowSafeOverlap(c, a, me, inBytes, outBytes, block)) return Status::ok();
  *taken = true;
  // An out-of-place broadcast's root: its input into its output, on its stream, before the launch
  // (a previous call on the window is over: its second arrival waited for every peer's moves).
  if (c == Collective::kBroadcast && me == a.root && a.sendbuff != a.recvbuff)
    COLL_TRY(device::runtime()->copyAsync(a.recvbuff, a.sendbuff, block, a.stream));

  uint64_t print = windowPrint(c, a);
  print = mix(print, inWin ? inWin->peers->serial : 0);
  print = mix(print, inWin ? inOff : 0);
  print = mix(print, outWin ? outWin->peers->serial : 0);
  print = mix(print, outWin ? outOff : 0);
  print = mix(print, a.count);

  // Every rank's buffers, as this rank maps them.
  const char* in[kWindowMaxRanks] = {};
  char* out[kWindowMaxRanks] = {};
  for (int p = 0; p < n; ++p) {
    if (inWin) in[p] = peerAt(inWin, p, inOff);
    if (outWin) out[p] = peerAt(outWin, p, outOff);
  }
  const char* myIn = static_cast<const char*>(a.sendbuff);
  char* myOut = static_cast<char*>(a.recvbuff);
  size_t b0 = 0, b1 = 0;
  exec::window::blockOf(a.count, elem, n, me, &b0, &b1);

  bool reduces = c == Collective::kAllReduce || c == Collective::kReduceScatter;
  exec::ExecArgs args{a.sendbuff, a.recvbuff, type, reduces ? static_cast<collRedOp_t>(a.op) : collSum, n};
  args.direct = false;
  int channels = algorithms::channelsFor(block, comm->deviceMaxChannels, comm->deviceChannelMinBytes);
  for (int ch = 0; ch < channels; ++ch) {
    auto w = std::make_unique<DevWindow>();
    *w = DevWindow{};
    w->nranks = n;
    w->print = print;
    w->divide = reduces && a.op == collAvg ? 1 : 0;
    w->arrivals = arrivals->own(ch);
    w->epoch = arrivals->epoch(ch);
    for (int p = 0; p < n; ++p) w->arriveAt[p] = arrivals->at(p, ch);
    size_t part = b1 - b0;
    const char* src[kWindowMaxRanks];
    char* dst[kWindowMaxRanks];
    switch (c) {
      case Collective::kAllReduce:
        for (int p = 0; p < n; ++p) {
          src[p] = in[p] + b0 * elem;
          dst[p] = out[p] + b0 * elem;
        }
        addMove(w.get(), src, n, dst, n, part, elem, ch, channels);
        break;
      case Collective::kReduceScatter:
        for (int p = 0; p < n; ++p) src[p] = in[p] + static_cast<size_t>(me) * block;
        dst[0] = myOut;
        addMove(w.get(), src, n, dst, 1, a.count, elem, ch, channels);
        break;
      case Collective::kAllGather:
        src[0] = myIn;
        for (int p = 0; p < n; ++p) dst[p] = out[p] + static_cast<size_t>(me) * block;
        addMove(w.get(), src, 1, dst, n, a.count, elem, ch, channels);
        break;
      case Collective::kBroadcast:
        src[0] = out[a.root] + b0 * elem;  // the root's output holds its input (copied above if need be)
        for (int p = 0; p < n; ++p) dst[p] = out[p] + b0 * elem;
        addMove(w.get(), src, 1, dst, n, part, elem, ch, channels);
        break;
      case Collective::kReduce:  // not taken (above)
        break;
      case Collective::kAllToAll:
        for (int p = 0; p < n; ++p) {
          src[0] = myIn + static_cast<size_t>(p) * block;
          dst[0] = out[p] + static_cast<size_t>(me) * block;
          addMove(w.get(), src, 1, dst, 1, a.count, elem, ch, channels);
        }
        break;
    }
    exec::Work work;
    work.window = w.get();
    work.opName = a.name;
    work.channel = ch;
    work.timeoutMs = a.timeoutMs;
    work.args = args;
    windows->push_back(std::move(w));
    works->push_back(work);
  }
  arrivals->calls.fetch_add(1, std::memory_order_relaxed);
  return Status::ok();
}

}  // namespace coll
