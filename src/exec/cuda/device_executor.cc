#include "exec/cuda/device_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <sched.h>

#include "algorithms/channels.h"
#include "base/params.h"
#include "base/process.h"

#include "exec/cuda/dispatch.h"
#include "exec/cuda/host_threads.h"
#include "exec/cuda/launch.h"

namespace coll::exec {
namespace {

using dev::DevChannel;
using dev::DevPort;
using dev::DevResult;
using dev::DevStep;
using dev::DevWork;

size_t align16(size_t n) { return (n + 15) & ~size_t(15); }

constexpr size_t kMinBlockBytes = size_t(64) << 10;  // a pinned descriptor block's least size

using HostChannel = dev::ChannelWorks;  // a channel before it is laid out in pinned memory

// The emulated device's launch: channel 0 on the stream's thread, the others on threads of their
// own (the CTAs of a launch run at the same time); each channel a team of threads (host_team.h).
void runEmulated(const DevChannel* channels, int n) {
  std::vector<std::thread> ctas;
  for (int c = 1; c < n; ++c)
    ctas.emplace_back([channels, c] {
      requestShortSlices();  // base/process.h
      dev::runWorksOnHost(channels[c]);
    });
  dev::runWorksOnHost(channels[0]);
  for (auto& t : ctas) t.join();
}

}  // namespace

DeviceExecutor::DeviceExecutor(device::Runtime& rt, int nranks, int cudaDev)
    : rt_(rt),
      nranks_(nranks),
      cudaDev_(cudaDev),
      ctaThreads_(static_cast<int>(params::kDeviceThreads.get())),
      send_(algorithms::kMaxChannels, nullptr),
      recv_(algorithms::kMaxChannels, nullptr),
      scratch_(algorithms::kMaxChannels) {}

DeviceExecutor::~DeviceExecutor() {
  (void)drain();
  device::DeviceGuard onDevice(rt_, cudaDev_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    proxyStop_ = true;
  }
  proxyCv_.notify_all();
  if (proxy_.joinable()) proxy_.join();
  for (Block& b : freeBlocks_) rt_.freeHost(b.p);
  for (device::Event e : freeEvents_) rt_.destroyEvent(e);
  for (void* p : pendingFrees_) rt_.free(p);
  for (void* p : pendingAsyncFrees_) rt_.free(p);
  // Graphs that captured this communicator's calls must be destroyed before it (as with NCCL);
  // a release that comes later finds only the shared queue.
  for (auto& [id, l] : captured_) {
    rt_.freeHost(l.block.p);
    for (void* p : l.frees) rt_.free(p);
  }
  for (void* p : retiredScratch_) rt_.free(p);
  for (Scratch& s : scratch_)
    if (s.p) rt_.free(s.p);
  for (DevPort* p : send_)
    if (p) rt_.freeHost(p);
  for (DevPort* p : recv_)
    if (p) rt_.freeHost(p);
  if (abortWord_) rt_.freeHost(abortWord_);
  // Its memory is all freed above (cudaFree takes stream-ordered memory back, after its stream).
  rt_.destroyPool(pool_);
}

Status DeviceExecutor::init() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pool_) COLL_TRY(rt_.newPool(cudaDev_, &pool_));
  cyclesPerNs_ = rt_.cyclesPerNs(cudaDev_);
  if (!abortWord_) {
    void* a = nullptr;
    COLL_TRY(rt_.allocHost(sizeof(uint32_t), &a));
    abortWord_ = static_cast<uint32_t*>(a);
  }
  while (freeBlocks_.size() < static_cast<size_t>(kInitialBlocks)) {
    Block b;
    b.bytes = kMinBlockBytes;
    COLL_TRY(rt_.allocHost(b.bytes, &b.p));
    freeBlocks_.push_back(b);
  }
  return Status::ok();
}

// Ports for connections added since the last launch. A new port is written while an earlier
// launch may still run: that launch does not use it (connections are only ever added).
Status DeviceExecutor::adoptPorts(const Links& links, const char* opName) {
  if (!abortWord_ || !pool_) return Status(collInternalError, "the device executor was used before init()");
  if (generation_ == links.generation) return Status::ok();
  if (links.channels > algorithms::kMaxChannels)
    return COLL_ERROR(collInternalError, FMT_STRING("{}: {} channels of connections, more than {}"), opName,
                      links.channels, algorithms::kMaxChannels);
  for (int ch = 0; ch < links.channels; ++ch) COLL_TRY(ensurePorts(ch));
  generation_ = links.generation;
  hosts_.assign(static_cast<size_t>(nranks_), "");
  for (int p = 0; p < nranks_; ++p)
    if (p < static_cast<int>(links.hosts.size()) && !links.hosts[p].empty()) hosts_[p] = " on host " + links.hosts[p];
  sendConn_.resize(links.sendTo.size(), nullptr);
  recvConn_.resize(links.recvFrom.size(), nullptr);
  for (size_t key = 0; key < links.sendTo.size(); ++key) {
    int ch = static_cast<int>(key) / nranks_, p = static_cast<int>(key) % nranks_;
    for (int dir = 0; dir < 2; ++dir) {
      transport::Connection* c = dir == 0 ? links.sendTo[key] : links.recvFrom[key];
      transport::Connection*& had = dir == 0 ? sendConn_[key] : recvConn_[key];
      DevPort& port = dir == 0 ? send_[ch][p] : recv_[ch][p];
      if (c == had) continue;
      had = c;
      port = DevPort{};
      if (!c) continue;
      const transport::ConnInfo& info = c->info();
      if (info.fifo.tagged)
        return COLL_ERROR(collInternalError,
                          FMT_STRING("{}: the connection with rank {} is not a device connection (transport {})"),
                          opName, p, c->transportName());
      port = dev::portOf(info);
    }
  }
  return Status::ok();
}

// A channel's ports, none connected yet (a channel whose work needs no peer has only these).
Status DeviceExecutor::ensurePorts(int channel) {
  if (channel < 0 || channel >= algorithms::kMaxChannels)
    return COLL_ERROR(collInternalError, FMT_STRING("channel {} is outside [0, {})"), channel,
                      algorithms::kMaxChannels);
  if (send_[channel]) return Status::ok();
  void *s = nullptr, *r = nullptr;
  size_t bytes = sizeof(DevPort) * static_cast<size_t>(nranks_);
  COLL_TRY(rt_.allocHost(bytes, &s));
  Status ok = rt_.allocHost(bytes, &r);
  if (!ok.isOk()) {
    rt_.freeHost(s);
    return ok;
  }
  send_[channel] = static_cast<DevPort*>(s);
  recv_[channel] = static_cast<DevPort*>(r);
  for (int p = 0; p < nranks_; ++p) {
    new (&send_[channel][p]) DevPort();
    new (&recv_[channel][p]) DevPort();
  }
  return Status::ok();
}

Result<DeviceExecutor::Block> DeviceExecutor::takeBlock(size_t bytes) {
  for (size_t i = 0; i < freeBlocks_.size(); ++i)
    if (freeBlocks_[i].bytes >= bytes) {
      Block b = freeBlocks_[i];
      freeBlocks_.erase(freeBlocks_.begin() + static_cast<long>(i));
      return b;
    }
  Block b;
  b.bytes = std::max(kMinBlockBytes, bytes);
  COLL_TRY(rt_.allocHost(b.bytes, &b.p));
  return b;
}

// The kernel a collective's work runs in: its element type and kernel op (launch.h), and which
// kernel (the interpreter's, the window or the one-sided one).
DeviceExecutor::KernelKey DeviceExecutor::keyOf(const Work& w) {
  int kind = !w.window ? dev::kInterpreterKernel : w.window->nranks > 0 ? dev::kWindowKernel : dev::kOneSidedKernel;
  return {static_cast<int>(w.args.type), dev::kernelOp(w.args.type, w.args.op, w.args.premul), kind};
}

Status DeviceExecutor::enqueue(const std::vector<Work>& collectives, const std::vector<P2POp>* p2p, const Links& links,
                               device::Stream stream, const char* opName, int64_t timeoutMs, LaunchTag tag) {
  std::lock_guard<std::mutex> lock(mu_);
  // The call's last launch takes the tag (launchChannels); a call that launched nothing is done
  // now. A failed enqueue drops it: its caller reports the failure.
  pendingTag_ = tag;
  Status s = enqueueLocked(collectives, p2p, links, stream, opName, timeoutMs);
  if (s.isOk()) tellDone(pendingTag_, true);
  pendingTag_ = LaunchTag{};
  return s;
}

void DeviceExecutor::tellDone(LaunchTag& tag, bool ok) {
  if (tag.first && launchDone_) launchDone_(tag, ok);
  tag = LaunchTag{};
}

Status DeviceExecutor::enqueueLocked(const std::vector<Work>& collectives, const std::vector<P2POp>* p2p,
                                     const Links& links, device::Stream stream, const char* opName, int64_t timeoutMs) {
  // Launches and records go to the current device: this communicator's, whatever the caller's is.
  device::DeviceGuard onDevice(rt_, cudaDev_);
  COLL_TRY(onDevice.status());
  COLL_TRY(reap());
  COLL_TRY(adoptPorts(links, opName));
  DevWork base;
  base.proto = dev::kSimple;
  base.abortFlag = abortWord_;
  base.timeoutNs = static_cast<uint64_t>(timeoutMs > 0 ? timeoutMs : links.timeoutMs) * 1000000ull;

  if (p2p && collectives.empty()) {
    // One CTA per (peer, direction, channel), its operations in posting order (host_threads.h);
    // bytes as int8.
    std::vector<HostChannel> chans = dev::p2pChannels(*p2p, base);
    return launchChannels(chans, {collInt8, static_cast<int>(dev::Op::kSum)}, links, stream, opName, true);
  }
  // There is one kernel per (type, op), and a window kernel per pair: a group's collectives of
  // several kinds are launched in runs of one kind, in call order (every rank makes the same
  // calls, so the same launches).
  for (size_t i = 0; i < collectives.size();) {
    KernelKey key = keyOf(collectives[i]);
    if (key.op < 0)
      return COLL_ERROR(collInternalError, FMT_STRING("{}: no device kernel for type {} and op {}"), opName,
                        static_cast<int>(collectives[i].args.type), static_cast<int>(collectives[i].args.op));
    // One CTA per channel used, in channel order; each runs its shares in call order.
    std::vector<HostChannel> byChannel(algorithms::kMaxChannels);
    size_t j = i;
    for (; j < collectives.size() && keyOf(collectives[j]) == key; ++j) {
      const Work& w = collectives[j];
      if (!w.window && (!w.schedule || w.schedule->empty())) continue;
      if (w.channel < 0 || w.channel >= algorithms::kMaxChannels)
        return COLL_ERROR(collInternalError, FMT_STRING("{}: channel {}"), opName, w.channel);
      HostChannel& c = byChannel[w.channel];
      c.channel = w.channel;
      c.steps.push_back(w.window ? std::vector<dev::DevStep>{} : dev::toDevSteps(*w.schedule));
      c.windows.push_back(w.window ? *w.window : dev::DevWindow{});
      DevWork dw = base;
      dw.type = w.args.type;
      dw.op = w.args.op;
      dw.nranks = w.args.nranks;
      dw.premul = w.args.premul ? 1 : 0;
      dw.scalar = w.args.scalar;
      dw.scalarPtr = w.args.scalarPtr;
      dw.input = w.args.input;
      dw.output = w.args.output;
      dw.scratch = w.args.scratch;
      dw.proto = w.args.ll ? dev::kLL : dev::kSimple;
      if (w.check.print) std::memcpy(dw.print, w.check.print, sizeof(dw.print));
      dw.window = w.window;  // a marker until launchChannels points it into the launch's block
      c.works.push_back(dw);
    }
    std::vector<HostChannel> chans;
    for (HostChannel& c : byChannel)
      if (!c.works.empty()) chans.push_back(std::move(c));
    COLL_TRY(launchChannels(chans, key, links, stream, opName, j == collectives.size()));
    i = j;
  }
  return Status::ok();
}

// One launch of chans on stream, all of one kernel key. mu_ held.
Status DeviceExecutor::launchChannels(std::vector<HostChannel>& chans, KernelKey key, const Links& links,
                                      device::Stream stream, const char* opName, bool last) {
  if (chans.empty()) {
    if (last) freeStaged(stream);  // nothing launched: what was staged for it is not read
    return Status::ok();
  }
  for (HostChannel& c : chans) {
    COLL_TRY(ensurePorts(c.channel));
    for (DevWork& dw : c.works) {
      dw.send = send_[c.channel];
      dw.recv = recv_[c.channel];
    }
  }

  // Layout in one pinned block: channels, works, results, windows, steps.
  size_t nworks = 0, nsteps = 0, nwindows = 0;
  for (const HostChannel& c : chans) {
    nworks += c.works.size();
    for (const auto& s : c.steps) nsteps += s.size();
    for (const DevWork& dw : c.works) nwindows += dw.window ? 1 : 0;
  }
  size_t offWorks = align16(chans.size() * sizeof(DevChannel));
  size_t offResults = offWorks + align16(nworks * sizeof(DevWork));
  size_t offWindows = offResults + align16(chans.size() * sizeof(DevResult));
  size_t offSteps = offWindows + align16(nwindows * sizeof(dev::DevWindow));
  size_t total = offSteps + nsteps * sizeof(DevStep);
  COLL_ASSIGN_OR_RETURN(Block block, takeBlock(total));
  char* at = static_cast<char*>(block.p);
  auto* channels = reinterpret_cast<DevChannel*>(at);
  auto* works = reinterpret_cast<DevWork*>(at + offWorks);
  auto* results = reinterpret_cast<DevResult*>(at + offResults);
  auto* windows = reinterpret_cast<dev::DevWindow*>(at + offWindows);
  auto* steps = reinterpret_cast<DevStep*>(at + offSteps);
  for (size_t c = 0; c < chans.size(); ++c) {
    results[c] = DevResult{};
    channels[c].works = works;
    channels[c].nworks = static_cast<int32_t>(chans[c].works.size());
    for (size_t i = 0; i < chans[c].works.size(); ++i) {
      const std::vector<DevStep>& s = chans[c].steps[i];
      if (!s.empty()) std::memcpy(steps, s.data(), s.size() * sizeof(DevStep));  // a window work has none
      *works = chans[c].works[i];
      works->steps = steps;
      works->nsteps = static_cast<int32_t>(s.size());
      works->result = &results[c];
      if (works->window) {
        *windows = chans[c].windows[i];
        works->window = windows++;
      }
      steps += s.size();
      ++works;
    }
  }

  Launch l;
  l.block = block;
  l.nchannels = static_cast<int>(chans.size());
  l.results = results;
  l.opName = opName;
  l.key = key;
  // Captured: recorded as done when captured (pendingTag_ stays for enqueue() to tell).
  if (rt_.capturing(stream)) return enqueueCaptured(std::move(l), channels, links, stream, opName, last);
  if (freeEvents_.empty()) {
    device::Event e = nullptr;
    Status s = rt_.newEvent(&e);
    if (!s.isOk()) {
      freeBlocks_.push_back(block);
      return s;
    }
    freeEvents_.push_back(e);
  }
  l.event = freeEvents_.back();
  freeEvents_.pop_back();
  // Launches of this communicator share its FIFOs: one on another stream waits for the last.
  Status s = inFlight_.empty() ? Status::ok() : rt_.waitEvent(stream, inFlight_.back().event);
  if (s.isOk()) s = launchOn(channels, l.nchannels, key, stream, opName);
  if (s.isOk()) s = rt_.record(l.event, stream);
  if (!s.isOk()) {
    // Nothing of this launch may still run unless the record alone failed; keep its memory then.
    if (failure_.isOk()) failure_ = s;
    freeEvents_.push_back(l.event);
    return s;
  }
  if (last) {
    // What this call staged is read by its launches: freed after the last of them.
    l.frees.swap(pendingFrees_);
    freeStaged(stream);
    l.tag = pendingTag_;
    pendingTag_ = LaunchTag{};
  }
  inFlight_.push_back(std::move(l));
  ++launches_;
  startProxy(links);
  proxyCv_.notify_all();
  return Status::ok();
}

// The stream-ordered staged copies of this call, freed on stream after what it holds so far.
void DeviceExecutor::freeStaged(device::Stream stream) {
  for (void* p : pendingAsyncFrees_) (void)rt_.freeAsync(p, stream);
  pendingAsyncFrees_.clear();
}

// The interpreter over `n` channels on stream: the kernel, or on the emulated device a stream
// item that runs the channels on CPU threads.
Status DeviceExecutor::launchOn(const DevChannel* channels, int n, KernelKey key, device::Stream stream,
                                const char* opName) {
  if (rt_.emulated()) return rt_.hostTask(stream, [channels, n] { runEmulated(channels, n); });
  std::string e = dev::launchInterpreter(channels, n, ctaThreads_, key.type, key.op, key.kind, stream);
  if (!e.empty()) return COLL_ERROR(collUnhandledCudaError, FMT_STRING("{}: the kernel launch failed: {}"), opName, e);
  return Status::ok();
}

// A communicator's device links are one object for its whole life: set once, before the proxy
// thread that reads it starts.
void DeviceExecutor::startProxy(const Links& links) {
  // Copied here, under mu_, from the caller's thread (the one that rebuilds the links): the proxy
  // thread reads it under mu_ and never reads the Links' field while they change.
  wait_ = links.wait;
  if (proxy_.joinable()) return;
  links_ = &links;
  proxy_ = std::thread([this] {
    requestShortSlices();  // base/process.h: it moves network slots for kernels that wait
    proxyLoop();
  });
}

// The first failed channel of l breaks the communicator: FIFO positions are no longer
// consistent, so launches queued behind it end at the abort word instead of each waiting out its
// timeout. A captured launch may be replaying: its codes are read atomically, the rest only once
// one failed.
void DeviceExecutor::reportFailure(const Launch& l, const char* suffix) {
  for (int c = 0; c < l.nchannels && failure_.isOk(); ++c) {
    if (__atomic_load_n(&l.results[c].code, __ATOMIC_ACQUIRE) == DevResult::kOk) continue;
    DevResult r = l.results[c];
    std::string where = r.peer >= 0 && r.peer < nranks_ ? hosts_[r.peer] : "";
    // Whom the failed wait was for, as the CPU executor leaves it: the blame that follows starts there.
    if (r.code == DevResult::kTimeout && r.peer >= 0 && wait_)
      wait_->waitsFor(r.peer, WaitState::toMs(std::chrono::steady_clock::now()), r.step);
    failWith(dev::failureStatus(r, (l.opName + suffix).c_str(), where, describe_, rank_));
  }
}

// A launch into the graph that stream is capturing (see the header).
Status DeviceExecutor::enqueueCaptured(Launch l, const dev::DevChannel* channels, const Links& links,
                                       device::Stream stream, const char* opName, bool last) {
  if (links.progress && !links.progress->empty()) {
    freeBlocks_.push_back(l.block);
    return COLL_ERROR(collInvalidUsage,
                      FMT_STRING("{}: a CUDA graph cannot capture a communicator with network (TCP) connections: "
                                 "the proxy thread that moves their slots cannot follow the graph's launches"),
                      opName);
  }
  uint64_t id = nextCaptureId_++;
  std::shared_ptr<Released> queue = released_;
  Status s = rt_.retainWhileGraphLives(stream, [queue, id] {
    std::lock_guard<std::mutex> lock(queue->mu);
    queue->ids.push_back(id);
  });
  if (!s.isOk()) {
    freeBlocks_.push_back(l.block);
    return s;
  }
  s = launchOn(channels, l.nchannels, l.key, stream, opName);
  // Kept even when the launch failed: the graph's release still names this id.
  if (last) l.frees.swap(pendingFrees_);
  captured_.emplace(id, std::move(l));
  if (!s.isOk()) return s;
  ++launches_;
  startProxy(links);
  proxyCv_.notify_all();  // an idle proxy now watches the peers while the graph lives
  return Status::ok();
}

// Frees what released graphs held, and reports a captured launch whose replay failed.
void DeviceExecutor::reapCaptured() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(released_->mu);
    ids.swap(released_->ids);
  }
  for (uint64_t id : ids) {
    auto it = captured_.find(id);
    if (it == captured_.end()) continue;
    freeBlocks_.push_back(it->second.block);
    for (void* p : it->second.frees) rt_.free(p);
    captured_.erase(it);
  }
  if (captured_.empty() && !retiredScratch_.empty()) {
    // No graph reads them any more; an eager launch still in flight may: freed after it.
    auto& frees = inFlight_.empty() ? pendingFrees_ : inFlight_.back().frees;
    frees.insert(frees.end(), retiredScratch_.begin(), retiredScratch_.end());
    retiredScratch_.clear();
  }
  for (const auto& [id, l] : captured_) reportFailure(l, " (in a CUDA graph)");
}

size_t DeviceExecutor::capturedLaunches() {
  std::lock_guard<std::mutex> lock(mu_);
  reapCaptured();
  return captured_.size();
}

void DeviceExecutor::failWith(Status s) {
  if (failure_.isOk()) failure_ = std::move(s);
  abort();
}

// The proxy: network progress, dead peers, reaping; idle (waiting on proxyCv_) when no launch is
// in flight and nothing waits to be sent.
void DeviceExecutor::proxyLoop() {
  using Clock = std::chrono::steady_clock;
  auto lastCheck = Clock::now();
  Clock::time_point stopDeadline{};
  for (;;) {
    bool idle, stopping;
    uint64_t seen;  // launches enqueued before this poll: the ones whose slots it sees
    {
      std::lock_guard<std::mutex> lock(mu_);
      (void)reap();
      idle = inFlight_.empty();
      stopping = proxyStop_;
      seen = launches_;
    }
    // Polled after the reap: a launch that completed before it (whoever reaped it) has published
    // its last slots by now, so they are seen here before the proxy may go idle.
    bool network = false, unsent = false;
    Status s;
    std::vector<std::pair<int, int>> dead;  // (rank, pid) of peers whose process is gone
    bool checked = false;                   // the 100 ms checks ran: whom launches wait for is told too
    {
      std::lock_guard<std::mutex> hold(proxyMu_);
      const Links& links = *links_;
      network = links.progress && !links.progress->empty();
      if (network) {
        s = links.progress->pollAll();
        unsent = s.isOk() && links.progress->hasUnsentData();
      }
      auto now = Clock::now();
      if (s.isOk() && now - lastCheck > std::chrono::milliseconds(100)) {
        lastCheck = now;
        checked = true;
        for (size_t p = 0; p < links.localPids.size() && s.isOk(); ++p) {
          int pid = links.localPids[p];
          bool used = false;
          for (size_t key = p; key < links.sendTo.size(); key += links.localPids.size())
            used = used || links.sendTo[key] || links.recvFrom[key];
          if (used && pid > 0 && processGone(pid)) dead.emplace_back(static_cast<int>(p), pid);
        }
        // A peer that gave up (its notice, e.g. "rank 2 failed: rank 1 died") ends what waits for it.
        std::string notice = s.isOk() && links.peerNotice ? links.peerNotice() : "";
        if (!notice.empty()) s = COLL_ERROR(collRemoteError, FMT_STRING("{}"), notice);
      }
    }
    // A peer that exited after taking every byte this rank sent it ended nothing: only a channel
    // that waits for it is stuck (DevResult::recvWait, sendWait).
    if (checked) {
      std::lock_guard<std::mutex> lock(mu_);
      announceWait();
    }
    for (const auto& [peer, pid] : dead) {
      std::lock_guard<std::mutex> lock(mu_);
      if (s.isOk() && waitsFor(peer))
        s = COLL_ERROR(collRemoteError, FMT_STRING("rank {} (pid {}) died while this rank's launches waited for it"),
                       peer, pid);
    }
    if (!s.isOk()) {
      std::lock_guard<std::mutex> lock(mu_);
      failWith(std::move(s));
      unsent = false;  // the connections are broken: nothing more will go out
    }
    // At destroy, what the last launches published still goes out, within the timeout; after
    // collCommAbort nothing more is owed to anyone.
    if (stopping && __atomic_load_n(abortWord_, __ATOMIC_ACQUIRE)) return;
    if (stopping && idle && unsent) {
      if (stopDeadline == Clock::time_point())
        stopDeadline = Clock::now() + std::chrono::milliseconds(links_->timeoutMs);
      if (Clock::now() > stopDeadline) return;
    }
    if (idle && !unsent) {
      std::unique_lock<std::mutex> lock(mu_);
      // A launch enqueued since `seen` wakes it, even one that completed and was reaped by
      // another thread meanwhile: its last slots still have to go out.
      auto woken = [&] { return proxyStop_ || launches_ != seen; };
      // While a graph holds captured launches, a replay may wait for a peer at any time, unseen
      // by the executor: the proxy keeps watching the peers (and the replays' results) every
      // 100 ms, so a dead peer ends a replay at the abort word instead of at the timeout.
      if (captured_.empty())
        proxyCv_.wait(lock, woken);
      else
        proxyCv_.wait_for(lock, std::chrono::milliseconds(100), woken);
      if (proxyStop_ && launches_ == seen) return;  // nothing enqueued since the last poll
      continue;
    }
    // Network slots want the proxy back at once; otherwise it only watches, and leaves the cores
    // to the kernels (on the emulated device, the CTAs are CPU threads).
    if (network)
      dev::yieldOrNap();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

Status DeviceExecutor::releaseMemory() {
  COLL_TRY(drain());
  std::lock_guard<std::mutex> lock(mu_);
  if (!captured_.empty())
    return COLL_ERROR(collInvalidUsage,
                      FMT_STRING("{} launches live in CUDA graphs, which may replay them: destroy those graphs first"),
                      captured_.size());
  device::DeviceGuard onDevice(rt_, cudaDev_);
  COLL_TRY(onDevice.status());
  for (Scratch& s : scratch_) {
    if (s.p) rt_.free(s.p);
    s = Scratch{};
  }
  for (auto* list : {&pendingFrees_, &pendingAsyncFrees_, &retiredScratch_}) {
    for (void* p : *list) rt_.free(p);
    list->clear();
  }
  rt_.trimPool(pool_);
  return Status::ok();
}

size_t DeviceExecutor::scratchBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t total = 0;
  for (const Scratch& s : scratch_) total += s.bytes;
  return total;
}

Result<void*> DeviceExecutor::scratch(size_t bytes, int channel, device::Stream stream) {
  std::lock_guard<std::mutex> lock(mu_);
  device::DeviceGuard onDevice(rt_, cudaDev_);
  COLL_TRY(onDevice.status());
  if (channel < 0 || channel >= algorithms::kMaxChannels)
    return COLL_ERROR(collInternalError, FMT_STRING("scratch for channel {}"), channel);
  Scratch& s = scratch_[channel];
  if (bytes <= s.bytes) return s.p;
  if (rt_.capturing(stream) || !captured_.empty()) {
    // A graph may replay what reads the old scratch at any time: it is freed once no graph holds
    // a launch, and the new one is made with alloc (stream-ordered memory cannot outlive its
    // stream's capture). Capture is set-up time, not the data path.
    if (s.p) retiredScratch_.push_back(s.p);
    s = Scratch{};
    COLL_TRY(rt_.alloc(cudaDev_, bytes, &s.p));
    s.bytes = bytes;
    return s.p;
  }
  // The data path: stream-ordered memory, which never waits for other work on the device (a
  // cudaMalloc or cudaFree here could wait for a peer's kernel that waits for this rank). The old
  // scratch is freed on the stream once the launches in flight, which may read it, are done.
  if (s.p && s.async) {
    if (!inFlight_.empty()) COLL_TRY(rt_.waitEvent(stream, inFlight_.back().event));
    COLL_TRY(rt_.freeAsync(s.p, stream));
  } else if (s.p) {
    // Made by alloc while graphs lived: freed with free once the launches in flight are done.
    (inFlight_.empty() ? pendingFrees_ : inFlight_.back().frees).push_back(s.p);
  }
  s = Scratch{};
  COLL_TRY(rt_.allocAsync(pool_, bytes, stream, &s.p));
  s.bytes = bytes;
  s.async = true;
  return s.p;
}

Result<void*> DeviceExecutor::stage(const void* src, size_t bytes, device::Stream stream) {
  std::lock_guard<std::mutex> lock(mu_);
  device::DeviceGuard onDevice(rt_, cudaDev_);
  COLL_TRY(onDevice.status());
  void* copy = nullptr;
  if (rt_.capturing(stream)) {
    // Lives as long as the graph (Launch::frees of the captured launch).
    COLL_TRY(rt_.alloc(cudaDev_, bytes, &copy));
    pendingFrees_.push_back(copy);
  } else {
    // Stream-ordered: freed on the stream right after the launch that reads it.
    COLL_TRY(rt_.allocAsync(pool_, bytes, stream, &copy));
    pendingAsyncFrees_.push_back(copy);
  }
  COLL_TRY(rt_.copyAsync(copy, src, bytes, stream));
  return copy;
}

Status DeviceExecutor::reap() {
  reapCaptured();
  while (!inFlight_.empty()) {
    Launch& l = inFlight_.front();
    if (!rt_.done(l.event)) break;
    reportFailure(l, "");
    bool ok = true;
    for (int c = 0; c < l.nchannels; ++c) ok = ok && l.results[c].code == DevResult::kOk;
    tellDone(l.tag, ok);
    addTimings(l);
    freeBlocks_.push_back(l.block);
    freeEvents_.push_back(l.event);
    for (void* p : l.frees) rt_.free(p);
    inFlight_.pop_front();
  }
  return failure_;
}

template <typename F>
bool DeviceExecutor::anyRunningChannel(F f) const {
  auto any = [&f](const Launch& l) {
    for (int c = 0; c < l.nchannels; ++c)
      if (f(l.results[c])) return true;
    return false;
  };
  for (const Launch& l : inFlight_)
    if (any(l)) return true;
  for (const auto& [id, l] : captured_)
    if (any(l)) return true;
  return false;
}

void DeviceExecutor::announceWait() {
  WaitState* wait = wait_;
  if (!wait) return;
  int peer = -1, step = -1;
  if (anyRunningChannel([&](const dev::DevResult& r) { return dev::waitingOn(r, &peer, &step); })) {
    wait->waitsFor(peer, WaitState::toMs(std::chrono::steady_clock::now()), step);
    announced_ = true;
  } else if (announced_) {
    // Only what this executor said: the host path of the same communicator announces its own.
    wait->progressed();
    announced_ = false;
  }
}

bool DeviceExecutor::waitsFor(int peer) const {
  return anyRunningChannel([peer](const dev::DevResult& r) { return dev::waitsFor(r, peer); });
}

void DeviceExecutor::addTimings(const Launch& l) {
  uint64_t start = ~uint64_t(0), end = 0, first = ~uint64_t(0), last = 0;
  collDeviceTimings_t& t = timings_;
  const double usPerCycle = 1e-3 / cyclesPerNs_;
  for (int c = 0; c < l.nchannels; ++c) {
    const dev::DevTiming& d = l.results[c].timing;
    if (d.start == 0) continue;  // a channel that never ran (an earlier failure)
    start = std::min(start, d.start);
    end = std::max(end, d.end);
    if (d.firstPiece) first = std::min(first, d.firstPiece);
    last = std::max(last, d.lastPiece);
    ++t.channels;
    t.pieces += d.pieces;
    t.recvPollUs += static_cast<double>(d.recvPollCycles) * usPerCycle;
    t.sendPollUs += static_cast<double>(d.sendPollCycles) * usPerCycle;
    t.recvFenceUs += static_cast<double>(d.recvFenceCycles) * usPerCycle;
    t.sendFenceUs += static_cast<double>(d.sendFenceCycles) * usPerCycle;
  }
  if (end == 0) return;
  ++t.launches;
  t.kernelUs += static_cast<double>(end - start) * 1e-3;
  if (first != ~uint64_t(0)) {
    t.firstPieceUs += static_cast<double>(first - start) * 1e-3;
    t.lastPieceUs += static_cast<double>(last - start) * 1e-3;
  }
}

collDeviceTimings_t DeviceExecutor::takeTimings() {
  std::lock_guard<std::mutex> lock(mu_);
  (void)reap();
  collDeviceTimings_t t = timings_;
  timings_ = collDeviceTimings_t{};
  return t;
}

Status DeviceExecutor::poll() {
  std::lock_guard<std::mutex> lock(mu_);
  return reap();
}

void DeviceExecutor::abort() {
  if (abortWord_) __atomic_store_n(abortWord_, 1u, __ATOMIC_RELEASE);
}

// Waits without holding mu_, which the proxy needs to move the network slots the launches wait for.
Status DeviceExecutor::drain() {
  for (;;) {
    device::Event e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      (void)reap();
      if (inFlight_.empty()) return failure_;
      e = inFlight_.front().event;
    }
    Status s = rt_.waitFor(e);
    if (!s.isOk()) {
      std::lock_guard<std::mutex> lock(mu_);
      failWith(std::move(s));
      return failure_;
    }
  }
}

}  // namespace coll::exec
