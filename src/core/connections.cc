#include "core/connections.h"

#include <sched.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "algorithms/channels.h"
#include "base/ifaddr.h"
#include "base/log.h"
#include "base/params.h"
#include "core/call_check.h"
#include "core/comm.h"
#include "device/runtime.h"
#include "topo/paths.h"
#include "transport/proxy.h"

namespace coll {
namespace {

// Bootstrap tags for connection setup (user space: top bit clear). A (peer, direction, channel)
// is connected once; the channel is in the tag's high word (channelTag), the peer tells the rest
// apart.
constexpr uint64_t kTagDescriptor = 0x1000;
constexpr uint64_t kTagConnected = 0x1001;
constexpr uint64_t kTagDeviceDescriptor = 0x1002;  // the device connections' (device_)
constexpr uint64_t kTagDeviceConnected = 0x1003;
// A sending end's call print, sent to the receiving end before it waits for the descriptor.
constexpr uint64_t kTagWish = 0x1004;
constexpr uint64_t kTagDeviceWish = 0x1005;
constexpr size_t kNameBytes = 8;

uint64_t channelTag(uint64_t tag, int channel) { return tag | (static_cast<uint64_t>(channel) << 32); }

std::vector<int> uniqueSorted(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

size_t Connections::deviceBytes() const {
  size_t total = 0;
  for (const auto* side : {&send_, &recv_})
    for (const auto& [key, conn] : *side) total += conn ? conn->deviceBytes() : 0;
  return total;
}

Status checkDataPathParams() {
  int64_t slots = params::kNSlots.get(), buff = params::kBuffSize.get(), socks = params::kNSocks.get();
  if (slots < 2 || slots > transport::kMaxSlots)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_NSLOTS={} is outside [2, {}]"), slots,
                      transport::kMaxSlots);
  if (buff < slots * 4096 || buff > (int64_t(1) << 30))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_BUFFSIZE={} is outside [COLL_NSLOTS x 4096, 1 GiB]"), buff);
  // A slot's byte count shares the tag word with its flags (transport/fifo.h).
  if (buff / slots >= (int64_t(1) << 29))
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("COLL_BUFFSIZE={} over COLL_NSLOTS={} makes slots of 512 MiB or more: use more "
                                 "slots or a smaller buffer"),
                      buff, slots);
  int64_t p2pBuff = params::kP2PBuffSize.get();
  if (p2pBuff < slots * 4096 || p2pBuff > (int64_t(1) << 30))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_P2P_BUFFSIZE={} is outside [COLL_NSLOTS x 4096, 1 GiB]"),
                      p2pBuff);
  if (params::kP2PUnexpectedBytes.get() < 0)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_P2P_UNEXPECTED_BYTES={} is negative"),
                      params::kP2PUnexpectedBytes.get());
  if (socks < 1 || socks > 16)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_NSOCKS={} is outside [1, 16]"), socks);
  std::string executor = params::kExecutor.get();
  if (executor != "cpu" && executor != "device-host")
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_EXECUTOR={} is neither 'cpu' nor 'device-host'"), executor);
  topo::PathType level;
  if (!topo::parsePathType(params::kP2PLevel.get(), &level) || level == topo::PathType::kNet)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_P2P_LEVEL={} is not one of LOC, NVL, PIX, PXB, PHB, SYS"),
                      params::kP2PLevel.get());
  int64_t channels = params::kDeviceNChannels.get();
  if (channels < 1 || channels > algorithms::kMaxChannels)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_DEVICE_NCHANNELS={} is outside [1, {}]"), channels,
                      algorithms::kMaxChannels);
  if (params::kDeviceChannelMinBytes.get() < 1)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_DEVICE_CHANNEL_MIN_BYTES={} is not positive"),
                      params::kDeviceChannelMinBytes.get());
  int64_t threads = params::kDeviceThreads.get();
  if (threads < 64 || threads > 512 || threads % 32 != 0)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_DEVICE_THREADS={} is not a multiple of 32 in [64, 512]"),
                      threads);
  int64_t emu = params::kDeviceEmulationThreads.get();
  if (emu < 1 || emu > 64)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_DEVICE_EMULATION_THREADS={} is outside [1, 64]"), emu);
  if (params::kTimeoutMs.get() <= 0)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_TIMEOUT_MS={} is not positive"), params::kTimeoutMs.get());
  return Status::ok();
}

Connections::Connections(collComm* comm, bool device) : comm_(comm), device_(device) {
  ctx_.rank = comm->rank;
  ctx_.peers = &comm->bootstrap->peers();
  ctx_.secret = comm->bootstrap->secret();
  ctx_.nslots = static_cast<int>(params::kNSlots.get());
  int64_t buff = comm->options.buffBytes > 0 ? comm->options.buffBytes : params::kBuffSize.get();
  ctx_.slotBytes = static_cast<size_t>(buff / ctx_.nslots) & ~size_t(63);
  ctx_.nsocks = static_cast<int>(params::kNSocks.get());
  ctx_.timeoutMs = comm->options.bootstrapTimeoutMs;
  ctx_.abort = &comm->abortFlag;
  ctx_.untagged = device || (comm->executor && std::string(comm->executor->name()) == "device-host");
  ctx_.cudaDev = comm->cudaDev;
  // Device FIFOs carry an LL region of NCCL's LL step size (4096 lines: 32 KiB of data per slot,
  // 64 KiB of memory), never more bytes than the Simple slots have.
  if (device) ctx_.llLines = std::min<size_t>(ctx_.slotBytes / transport::kLLLineBytes, 4096);
  ctx_.bindAddress = comm->bootstrap->interface().address;  // init proved every rank reaches it
  ctx_.bindAddress.setPort(0);
  rebuildLinks();
}

Connections::~Connections() {
  // An aborted communicator's peers may be stopped or gone: the closes below must not wait for them.
  if (ctx_.abort && ctx_.abort->load())
    for (auto& state : states_) state.second->abandon();
  for (void* p : registered_) device::runtime()->unregisterHost(p);
}

// A device connection whose FIFO is host memory (host-staged shm, a network FIFO) becomes
// addressable by the device; one in device memory (p2p) already is.
Status Connections::registerForDevice(transport::Connection& c) {
  if (!device_) return Status::ok();
  device::Runtime* rt = device::runtime();
  const transport::Fifo& f = c.info().fifo;
  if (rt->isDeviceMemory(f.header, nullptr)) return Status::ok();
  COLL_TRY(rt->registerHost(f.header, f.totalBytes()));
  registered_.push_back(f.header);
  return Status::ok();
}

transport::TransportState& Connections::stateFor(const transport::Transport* t) {
  auto& s = states_[t];
  if (!s) s = t->newState(ctx_);
  return *s;
}

Status Connections::ensure(const std::vector<int>& sendPeers, const std::vector<int>& recvPeers, int channel,
                           const ConnectFor& call) {
  if (channel < 0 || channel >= algorithms::kMaxChannels || (channel > 0 && !device_))
    return COLL_ERROR(collInternalError, FMT_STRING("channel {} asked of {} connections"), channel,
                      device_ ? "device" : "host");
  const int base = channel * comm_->nranks;  // the maps' key of (peer 0, channel)
  std::vector<int> newRecv, newSend;
  for (int p : uniqueSorted(recvPeers))
    if (!recv_.count(base + p)) newRecv.push_back(p);
  for (int p : uniqueSorted(sendPeers))
    if (!send_.count(base + p)) newSend.push_back(p);
  if (newRecv.empty() && newSend.empty()) return Status::ok();
  auto& boot = *comm_->bootstrap;
  const auto& me = boot.peers()[comm_->rank];
  const uint64_t tagDescriptor = channelTag(device_ ? kTagDeviceDescriptor : kTagDescriptor, channel);
  const uint64_t tagConnected = channelTag(device_ ? kTagDeviceConnected : kTagConnected, channel);
  const uint64_t tagWish = channelTag(device_ ? kTagDeviceWish : kTagWish, channel);
  // A peer's print that differs from this call's (both non-zero): the sentence, else "".
  std::vector<char> mine(transport::kPrintBytes, 0);
  if (call.print) std::memcpy(mine.data(), call.print, mine.size());
  // sameOnly: only a print of the same collective number counts (a peer's descriptor may be for
  // its next call already, once it needs nothing more of this rank's current one).
  auto differs = [&](int peer, const std::vector<char>& theirs, bool sameOnly = false) -> std::string {
    static const std::vector<char> none(transport::kPrintBytes, 0);
    if (!call.print || theirs.size() != mine.size() || theirs == none || theirs == mine) return "";
    if (sameOnly && !sameCollective(mine.data(), theirs.data())) return "";
    return describeMismatch(mine.data(), theirs.data(), comm_->rank, peer, call.opName);
  };

  // Phase 1: receiving ends first; the receiver chooses the transport.
  std::vector<const transport::Transport*> chosen;
  for (int p : newRecv) {
    const transport::Transport* t = device_ ? transport::selectDeviceTransport(me, boot.peers()[p])
                                            : transport::selectTransport(me, boot.peers()[p]);
    if (!t && device_)
      return COLL_ERROR(collInvalidUsage,
                        FMT_STRING("no device transport connects rank {} to rank {} (COLL_SHM_DISABLE and "
                                   "COLL_P2P_DISABLE leave TCP, which needs no more than an interface)"),
                        p, me.rank);
    if (!t) return COLL_ERROR(collInternalError, FMT_STRING("no transport can connect rank {} to rank {}"), p, me.rank);
    std::vector<char> desc;
    COLL_ASSIGN_OR_RETURN(recv_[base + p], t->createRecv(ctx_, stateFor(t), p, &desc));
    COLL_TRY(registerForDevice(*recv_[base + p]));
    // The transport's name, this call's print, the descriptor.
    std::vector<char> msg(kNameBytes, 0);
    std::strncpy(msg.data(), t->name(), kNameBytes - 1);
    msg.insert(msg.end(), mine.begin(), mine.end());
    msg.insert(msg.end(), desc.begin(), desc.end());
    COLL_TRY(boot.sendBytes(p, tagDescriptor, msg));
    chosen.push_back(t);
  }
  // Phase 2: sending ends. Each tells its receiver what it connects for, then waits for the
  // descriptor; meanwhile a peer that wants to send to this rank for another call (it would wait
  // for this rank's descriptor too) ends the wait.
  for (int p : newSend) COLL_TRY(boot.sendBytes(p, tagWish, mine));
  for (int p : newSend) {
    COLL_ASSIGN_OR_RETURN(std::vector<char> msg,
                          boot.recvBytesWatching(p, tagDescriptor, tagWish,
                                                 [&](const std::vector<char>& theirs) { return differs(p, theirs); }));
    if (msg.size() < kNameBytes + transport::kPrintBytes)
      return COLL_ERROR(collInternalError, FMT_STRING("rank {} sent a short descriptor"), p);
    std::string name(msg.data(), strnlen(msg.data(), kNameBytes));
    const transport::Transport* t = transport::transportByName(name);
    if (!t) return COLL_ERROR(collInternalError, FMT_STRING("rank {} chose unknown transport '{}'"), p, name);
    std::vector<char> desc(msg.begin() + kNameBytes + transport::kPrintBytes, msg.end());
    COLL_ASSIGN_OR_RETURN(send_[base + p], t->connectSend(ctx_, stateFor(t), p, desc));
    COLL_TRY(registerForDevice(*send_[base + p]));
    if (!device_) send_[base + p]->fifo().inlineSmall = comm_->proto.ll;  // COLL_PROTO
    char ok = 1;
    COLL_TRY(boot.send(p, tagConnected, &ok, 1));
    COLL_LOG(INFO, NET, "rank {} -> rank {} via {} (channel {})", comm_->rank, p, t->name(), channel);
  }
  // Phase 3: complete the receiving ends once their senders are connected.
  // A peer that does not send to this rank but waits for its descriptor (it receives from this
  // rank for another call) sent one, with its print: it ends the wait.
  auto printOf = [](const std::vector<char>& descriptor) {
    if (descriptor.size() < kNameBytes + transport::kPrintBytes) return std::vector<char>();
    return std::vector<char>(descriptor.begin() + kNameBytes, descriptor.begin() + kNameBytes + transport::kPrintBytes);
  };
  for (size_t i = 0; i < newRecv.size(); ++i) {
    const int p = newRecv[i];
    COLL_ASSIGN_OR_RETURN(std::vector<char> theirs,
                          boot.recvBytesWatching(p, tagWish, tagDescriptor, [&](const std::vector<char>& d) {
                            return differs(p, printOf(d), true);
                          }));
    std::string why = differs(newRecv[i], theirs);
    if (!why.empty()) return Status(collInvalidUsage, why);
    char ok = 0;
    COLL_TRY(boot.recv(newRecv[i], tagConnected, &ok, 1));
    COLL_TRY(chosen[i]->completeRecv(ctx_, stateFor(chosen[i]), *recv_[base + newRecv[i]]));
    COLL_LOG(INFO, NET, "rank {} <- rank {} via {} (channel {})", comm_->rank, newRecv[i], chosen[i]->name(), channel);
  }
  std::unique_lock<std::mutex> guard;
  if (linksGuard_) guard = std::unique_lock<std::mutex>(*linksGuard_);
  rebuildLinks();
  return Status::ok();
}

// COLL_SPIN_US, resolved. Its default sleeps only where this host's ranks fit on the cores this
// process may use (and at once while every core is taken and the process has computation to
// run: Links::napWhenBusy): then the threads a waiting rank competes with are the computation it
// overlaps (which a nap leaves the core to), while with more ranks than cores the ranks
// themselves take turns, and yielding straight to the peer serves them better than naps that
// delay each turn.
static int usableCores() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

static int64_t napAfterUs(bool ranksFit) {
  int64_t v = params::kSpinUs.get();
  if (v != -2) return v < 0 ? -1 : v;
  return ranksFit ? 200 : -1;
}

// Where ranks fit the cores, a wait spins this many pauses (~6 us at the 11 ns a pause took on
// the development VM; longer on CPUs with a slower pause) before its first sched_yield: at 64,
// 1.3% of 2-rank 8-byte all-reduces made a system call for a peer only a microsecond late.
constexpr uint64_t kSpinsWhenRanksFit = 512;

void Connections::rebuildLinks() {
  exec::Links& l = links_;
  int n = comm_->nranks;
  // The maps are ordered by key: their last keys tell how many channels have connections.
  int keys = n;
  if (!send_.empty()) keys = std::max(keys, send_.rbegin()->first + 1);
  if (!recv_.empty()) keys = std::max(keys, recv_.rbegin()->first + 1);
  l.channels = (keys + n - 1) / n;
  l.sendTo.assign(static_cast<size_t>(l.channels) * n, nullptr);
  l.recvFrom.assign(static_cast<size_t>(l.channels) * n, nullptr);
  l.localPids.assign(n, 0);
  l.hosts.assign(n, "");
  for (const auto& [key, c] : send_) {
    l.sendTo[key] = c.get();
    progress_.add(c.get(), true);
  }
  for (const auto& [key, c] : recv_) {
    l.recvFrom[key] = c.get();
    progress_.add(c.get(), false);
  }
  l.progress = &progress_;
  ++l.generation;
  const auto& peers = comm_->bootstrap->peers();
  int ranksHere = 0;
  for (int p = 0; p < n; ++p) {
    if (peers[p].hostHash == peers[comm_->rank].hostHash) ++ranksHere;
    // Only a process on this host can be watched by pid; our own pid (ranks as threads) never dies alone.
    if (peers[p].hostHash == peers[comm_->rank].hostHash && peers[p].pid != getpid()) l.localPids[p] = peers[p].pid;
    l.hosts[p] = peers[p].hostName;
  }
  l.timeoutMs = comm_->options.timeoutMs;
  l.wait = comm_->waitState.get();
  // A rank with network connections runs two threads: its own and the process's network proxy,
  // unless the proxy is told the host is crowded (then the waiters run its rounds).
  int cores = usableCores();
  if (!progress_.empty()) transport::proxy::setCrowded(ranksHere * 2 > cores);
  bool ranksFit = ranksHere <= cores;
  l.napAfterUs = napAfterUs(ranksFit);
  l.napWhenBusy = params::kSpinUs.get() == -2 && l.napAfterUs >= 0;
  l.spinsBeforeYield = ranksFit ? kSpinsWhenRanksFit : 64;
  l.refMinBytes = comm_->proto.direct ? static_cast<size_t>(std::max<int64_t>(0, params::kShmDirectMin.get())) : 0;
  l.abort = &comm_->abortFlag;
  bootstrap::Bootstrap* boot = comm_->bootstrap.get();
  l.peerNotice = [boot] { return boot->peerFailure(0); };
}

Status Connections::ensureFor(const algorithms::Schedule& schedule, int channel, const ConnectFor& call) {
  bool missing = channel >= links_.channels;
  size_t base = static_cast<size_t>(channel) * static_cast<size_t>(comm_->nranks);
  for (const auto& st : schedule) {
    if (missing) break;
    if (st.sendPeer >= 0 && !links_.sendTo[base + st.sendPeer]) missing = true;
    if (st.recvPeer >= 0 && !links_.recvFrom[base + st.recvPeer]) missing = true;
  }
  if (!missing) return Status::ok();
  std::vector<int> sendPeers, recvPeers;
  algorithms::peersOf(schedule, &sendPeers, &recvPeers);
  return ensure(sendPeers, recvPeers, channel, call);
}

}  // namespace coll
