#include "core/window_path.h"

#include <algorithm>
#include <cstring>

#include "core/comm.h"
#include "core/connections.h"
#include "core/redop.h"
#include "core/registration.h"
#include "kernels/cpu/reduce.h"

namespace coll {

using algorithms::Collective;
using exec::window::Arrival;

Result<std::unique_ptr<WindowArrivals>> WindowArrivals::create(collComm* comm) {
  std::unique_ptr<WindowArrivals> w(new WindowArrivals());
  void* own = nullptr;
  // Host memory always: memAlloc would hand out device memory on a thread with a current device.
  COLL_TRY(memAllocHost(sizeof(Arrival), &own));
  std::memset(own, 0, sizeof(Arrival));
  w->own_ = static_cast<Arrival*>(own);
  COLL_ASSIGN_OR_RETURN(w->areas_, exchangeRanges(comm, own, sizeof(Arrival)));
  for (const PeerRange& r : w->areas_->ranks) w->all_.push_back(reinterpret_cast<const Arrival*>(r.base));
  // The hosts, in the order of their first ranks, and each host's ranks in rank order: the same
  // table on every rank (the bootstrap's).
  const auto& peers = comm->bootstrap->peers();
  std::vector<uint64_t> hosts;
  std::vector<std::vector<int>> byHost;
  for (int p = 0; p < comm->nranks; ++p) {
    size_t h = std::find(hosts.begin(), hosts.end(), peers[p].hostHash) - hosts.begin();
    if (h == hosts.size()) {
      hosts.push_back(peers[p].hostHash);
      byHost.emplace_back();
    }
    byHost[h].push_back(p);
  }
  size_t mine = std::find(hosts.begin(), hosts.end(), peers[comm->rank].hostHash) - hosts.begin();
  w->local_ = byHost[mine];
  w->localIndex_ = static_cast<int>(std::find(w->local_.begin(), w->local_.end(), comm->rank) - w->local_.begin());
  w->hostIndex_ = static_cast<int>(mine);
  w->hostAll_.assign(w->all_.size(), nullptr);
  for (int p : w->local_) w->hostAll_[static_cast<size_t>(p)] = w->all_[static_cast<size_t>(p)];
  bool uniform = hosts.size() > 1 && w->local_.size() > 1;
  for (const auto& h : byHost) uniform = uniform && h.size() == w->local_.size();
  if (uniform)
    for (const auto& h : byHost) w->cross_.push_back(h[static_cast<size_t>(w->localIndex_)]);
  return w;
}

WindowArrivals::~WindowArrivals() {
  areas_.reset();  // the peers' mappings first
  if (own_) (void)memFree(own_);
}

WindowReach windowReach(Collective c, int rank, int root) {
  switch (c) {
    case Collective::kAllReduce:
      return {true, true};
    case Collective::kReduceScatter:
      return {true, false};
    case Collective::kAllGather:
    case Collective::kAllToAll:
      return {false, true};
    case Collective::kBroadcast:
      return {rank == root, true};
    case Collective::kReduce:
      return {true, rank == root};
  }
  return {};
}

uint64_t windowPrint(Collective c, const OpArgs& a) {
  return (uint64_t(static_cast<int>(c) + 1) << 56) | (uint64_t(a.type & 0xff) << 48) | (uint64_t(a.op & 0xff) << 40) |
         (uint64_t(a.root & 0xffff) << 24) | std::min<uint64_t>(a.count, 0xffffff);
}

namespace {

// A fingerprint of windowPrint in words: "allreduce(sum, float32, count 1024)".
std::string describePrint(uint64_t print) {
  auto c = static_cast<Collective>(static_cast<int>(print >> 56) - 1);
  int type = static_cast<int>((print >> 48) & 0xff), op = static_cast<int>((print >> 40) & 0xff);
  std::string s = std::string(algorithms::collectiveName(c)) + "(";
  if (c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce)
    s += std::string(opName(op)) + ", ";
  s += fmt::format("{}, count {}", typeName(type), print & 0xffffff);
  if ((print & 0xffffff) == 0xffffff) s += " or more";
  if (c == Collective::kBroadcast || c == Collective::kReduce) s += fmt::format(", root {}", (print >> 24) & 0xffff);
  return s + ")";
}

bool overlap(const char* a, size_t an, const char* b, size_t bn) { return a < b + bn && b < a + an; }

}  // namespace

Status WindowArrivals::arrive(const std::vector<const Arrival*>& waited, int rank, uint64_t print,
                              const exec::Links& links, const char* opName, int64_t timeoutMs) {
  __atomic_store_n(&own_->epoch, ++epoch_, __ATOMIC_RELEASE);
  return exec::window::waitArrivals(waited, rank, epoch_, print, describePrint, links, opName, timeoutMs);
}

bool windowSafeOverlap(Collective c, const OpArgs& a, int rank, size_t inBytes, size_t outBytes, size_t blockBytes) {
  const char* in = static_cast<const char*>(a.sendbuff);
  const char* out = static_cast<const char*>(a.recvbuff);
  if (!in || !out || !overlap(in, inBytes, out, outBytes)) return true;
  switch (c) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
    case Collective::kReduce:
      return in == out;
    case Collective::kReduceScatter:
      return out == in + static_cast<size_t>(rank) * blockBytes;
    case Collective::kAllGather:
      return in == out + static_cast<size_t>(rank) * blockBytes;
    case Collective::kAllToAll:
      return false;
  }
  return false;
}

namespace {

// Whether the ranks a call reaches (every rank, or the host's ranks across hosts) reach each
// other's ranges of window peers by pointer.
bool reachable(const WindowPeers& peers, bool acrossHosts) {
  return acrossHosts ? peers.hostPointers : peers.allPointers;
}

// Rank p's buffer as this rank reaches it, from what p published: the window serial and offset.
// `mine` is this rank's window for the same buffer (the usual case: the same serial).
Result<char*> peerBuffer(collComm* comm, int p, uint64_t serial, uint64_t offset, size_t bytes,
                         const Registration* mine, const char* which, bool acrossHosts) {
  const Registration* w = mine && mine->peers->serial == serial ? mine : comm->registrations.windowBySerial(serial);
  if (serial == 0 || !w || !reachable(*w->peers, acrossHosts))
    return COLL_ERROR(collInvalidUsage,
                      FMT_STRING("rank {}'s {} does not lie in a window every rank reaches (window #{}): "
                                 "collectives on windows need every rank's buffers in windows"),
                      p, which, serial);
  const PeerRange& r = w->peers->ranks[static_cast<size_t>(p)];
  if (offset > r.size || bytes > r.size - offset)
    return COLL_ERROR(collInvalidUsage, FMT_STRING("rank {}'s {}: {} bytes at offset {} pass its window ({} bytes)"), p,
                      which, bytes, offset, r.size);
  return r.base + offset;
}

// The symmetric window every rank reaches by pointer that holds [p, p + bytes), or nullptr; the
// answer cached in *last while no window comes or goes. Sets last->offset.
const Registration* symmetricWindow(collComm* comm, WindowArrivals::Lookup* last, const void* p, size_t bytes,
                                    bool acrossHosts) {
  uint64_t generation = comm->registrations.generation();
  if (last->p != p || last->bytes != bytes || last->generation != generation) {
    const Registration* r = comm->registrations.windowHolding(p, bytes, &last->offset);
    last->window = r && (r->flags & COLL_WIN_COLL_SYMMETRIC) && reachable(*r->peers, acrossHosts) && !r->peers->device
                       ? r
                       : nullptr;
    last->p = p;
    last->bytes = bytes;
    last->generation = generation;
  }
  return last->window;
}

}  // namespace

bool preferWindows(const collComm* comm, Collective c, size_t bytes, const algorithms::Plan& plan) {
  const WindowArrivals* w = comm->windowArrivals.get();
  if (!w || comm->nranks < 2 || !comm->algoFilter.permitsWindow(c)) return false;
  if (!w->usable() && !(w->acrossHosts() && c == Collective::kAllReduce)) return false;
  return comm->algoFilter.forcesWindow(c) ||
         algorithms::predictWindowUs(c, comm->nranks, bytes, comm->costModel) <
             algorithms::predictUs(plan.algorithm, c, comm->nranks, bytes, comm->costModel);
}

namespace {

// All-reduce across hosts, after the first arrival among the host's ranks (core/window_path.h):
// a = the call, w->args = the host's buffers by rank (others' null).
Status allReduceAcrossHosts(collComm* comm, const OpArgs& a, WindowArrivals* w, const exec::Links& links,
                            int64_t timeoutMs) {
  const exec::window::Args& all = w->args;
  const std::vector<int>& host = w->hostRanks();
  size_t L = host.size(), elem = kernels::typeSize(all.type);
  // (1) Block l of the host's inputs, summed (collAvg divides at the end, by every rank's count),
  // into this rank's output only.
  exec::window::Args& local = w->local;
  local.collective = Collective::kAllReduce;
  local.in.assign(L, nullptr);
  local.out.assign(L, nullptr);
  for (size_t i = 0; i < L; ++i) local.in[i] = all.in[static_cast<size_t>(host[i])];
  local.out[static_cast<size_t>(w->localIndex())] = all.out[static_cast<size_t>(comm->rank)];
  local.count = all.count;
  local.type = all.type;
  local.op = all.op == collAvg ? collSum : all.op;
  local.nranks = static_cast<int>(L);
  local.rank = w->localIndex();
  exec::window::allReduce(local);
  size_t begin, end;
  exec::window::blockOf(all.count, elem, local.nranks, local.rank, &begin, &end);

  // (2) The ring between the hosts, over the network, on that block (its last step divides for
  // collAvg).
  if (begin < end) {
    WindowArrivals::CrossRing& ring = w->crossRing;
    if (ring.count != all.count || ring.elem != elem) {
      ring.count = ~size_t(0);
      size_t fifo = static_cast<size_t>(comm->conns->fifoBytes());
      size_t chunk = std::max<size_t>(1, std::min(comm->costModel.chunkBytes, fifo / 2) / elem);
      ring.schedule = algorithms::ringAllReduceAmong(w->crossRanks(), w->hostIndex(), begin, end - begin, chunk);
      ring.linksGeneration = ~uint64_t(0);
      ring.count = all.count;
      ring.elem = elem;
    }
    if (ring.linksGeneration != comm->conns->links().generation) {
      COLL_TRY(comm->conns->ensureFor(ring.schedule));
      ring.linksGeneration = comm->conns->links().generation;
    }
    exec::Work work;
    work.schedule = &ring.schedule;
    work.args = exec::ExecArgs{a.sendbuff, a.recvbuff, all.type, all.op, comm->nranks};
    work.args.direct = false;  // the pieces go over the network
    work.opName = a.name;
    work.timeoutMs = a.timeoutMs;
    // The hosts compare their calls through the ring's first pieces (the arrivals compare the
    // host's ranks).
    WirePrint print;
    attachCallCheck(comm, a, 0, &print, &work.check);
    COLL_TRY(comm->executor->run(work, comm->conns->links()));
  }

  // (3) Every rank of the host has its block final: each copies its own into the others' outputs.
  COLL_TRY(w->arrive(w->hostAll(), comm->rank, 0, links, a.name, timeoutMs));
  const char* mine = all.out[static_cast<size_t>(comm->rank)];
  for (int p : host)
    if (p != comm->rank && begin < end)
      std::memcpy(all.out[static_cast<size_t>(p)] + begin * elem, mine + begin * elem, (end - begin) * elem);
  COLL_TRY(w->arrive(w->hostAll(), comm->rank, 0, links, a.name, timeoutMs));
  w->calls.fetch_add(1, std::memory_order_relaxed);
  return Status::ok();
}

}  // namespace

Status runOnWindows(collComm* comm, const OpArgs& a, Collective c, bool* ran) {
  *ran = false;
  WindowArrivals* w = comm->windowArrivals.get();
  int n = comm->nranks, me = comm->rank;
  if (!w || a.count == 0 || a.premul.inUse) return Status::ok();
  // Across hosts only all-reduce, and only among the host's ranks (see the header).
  bool acrossHosts = !w->usable();
  if (acrossHosts && (c != Collective::kAllReduce || !w->acrossHosts())) return Status::ok();
  auto type = static_cast<collDataType_t>(a.type);
  size_t elem = kernels::typeSize(type), block = a.count * elem, nn = static_cast<size_t>(n);
  bool inBlocks = c == Collective::kReduceScatter || c == Collective::kAllToAll;
  bool outBlocks = c == Collective::kAllGather || c == Collective::kAllToAll;
  size_t inBytes = inBlocks ? block * nn : block, outBytes = outBlocks ? block * nn : block;
  WindowReach reach = windowReach(c, me, a.root);
  const Registration* inWin = nullptr;
  const Registration* outWin = nullptr;
  if (reach.out && !(outWin = symmetricWindow(comm, &w->lastOut, a.recvbuff, outBytes, acrossHosts)))
    return Status::ok();
  OpArgs local = a;
  if (c == Collective::kBroadcast && me == a.root && a.sendbuff != a.recvbuff &&
      !symmetricWindow(comm, &w->lastIn, a.sendbuff, inBytes, acrossHosts)) {
    // The root's input is not in a window, its output is: it copies the input into its output and
    // broadcasts from there, so that every rank decides from its output alone (the other ranks
    // cannot know where the root's input lies).
    std::memmove(a.recvbuff, a.sendbuff, inBytes);
    local.sendbuff = a.recvbuff;
  }
  if (reach.in && !(inWin = symmetricWindow(comm, &w->lastIn, local.sendbuff, inBytes, acrossHosts)))
    return Status::ok();
  size_t inOff = inWin ? w->lastIn.offset : 0, outOff = outWin ? w->lastOut.offset : 0;
  bool usesIn = reach.in || c == Collective::kAllGather || c == Collective::kAllToAll;
  bool usesOut = reach.out || c == Collective::kReduceScatter;
  if (usesIn && usesOut && !windowSafeOverlap(c, local, me, inBytes, outBytes, block)) return Status::ok();
  *ran = true;

  // First arrival: publish where this rank's buffers are, wait for every rank (of this host).
  const exec::Links& links = comm->conns->links();
  int64_t timeoutMs = a.timeoutMs > 0 ? a.timeoutMs : links.timeoutMs;
  Arrival* mine = w->own();
  uint64_t print = windowPrint(c, a);
  __atomic_store_n(&mine->print, print, __ATOMIC_RELAXED);
  __atomic_store_n(&mine->sendWindow, inWin ? inWin->peers->serial : 0, __ATOMIC_RELAXED);
  __atomic_store_n(&mine->sendOffset, inOff, __ATOMIC_RELAXED);
  __atomic_store_n(&mine->recvWindow, outWin ? outWin->peers->serial : 0, __ATOMIC_RELAXED);
  __atomic_store_n(&mine->recvOffset, outOff, __ATOMIC_RELAXED);
  const std::vector<const Arrival*>& waited = acrossHosts ? w->hostAll() : w->all();
  COLL_TRY(w->arrive(waited, me, print, links, a.name, timeoutMs));

  // Every rank's buffers as this rank reaches them; a peer's published place stays until it
  // passes the second arrival, which needs this rank's.
  exec::window::Args& args = w->args;
  args.collective = c;
  args.in.assign(nn, nullptr);
  args.out.assign(nn, nullptr);
  args.count = a.count;
  args.type = type;
  args.op = static_cast<collRedOp_t>(a.op);
  args.nranks = n;
  args.rank = me;
  args.root = a.root;
  args.in[static_cast<size_t>(me)] = static_cast<const char*>(local.sendbuff);
  args.out[static_cast<size_t>(me)] = static_cast<char*>(a.recvbuff);
  for (int p = 0; p < n; ++p) {
    if (p == me || !waited[static_cast<size_t>(p)]) continue;
    const Arrival* their = w->all()[static_cast<size_t>(p)];
    WindowReach r = windowReach(c, p, a.root);
    if (r.in) {
      COLL_ASSIGN_OR_RETURN(
          args.in[static_cast<size_t>(p)],
          peerBuffer(comm, p, __atomic_load_n(&their->sendWindow, __ATOMIC_RELAXED),
                     __atomic_load_n(&their->sendOffset, __ATOMIC_RELAXED), inBytes, inWin, "input", acrossHosts));
    }
    if (r.out) {
      COLL_ASSIGN_OR_RETURN(
          args.out[static_cast<size_t>(p)],
          peerBuffer(comm, p, __atomic_load_n(&their->recvWindow, __ATOMIC_RELAXED),
                     __atomic_load_n(&their->recvOffset, __ATOMIC_RELAXED), outBytes, outWin, "output", acrossHosts));
    }
  }
  if (acrossHosts) return allReduceAcrossHosts(comm, a, w, links, timeoutMs);
  exec::window::run(args);

  // Second arrival: once every rank is here, nobody reads or writes this rank's buffers any more.
  COLL_TRY(w->arrive(w->all(), me, 0, links, a.name, timeoutMs));
  w->calls.fetch_add(1, std::memory_order_relaxed);
  return Status::ok();
}

}  // namespace coll
