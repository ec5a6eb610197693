// The device executor's interpreter run on host memory (COLL_EXECUTOR=device-host): the shape the
// CUDA executor has, with CPU threads where the GPU has CTAs.
//
// A collective's schedule is one channel (the CPU executor's order: every step in turn); a
// group's sends and receives get one channel per (peer, direction), each running its operations
// in posting order, so that any matching pattern completes as on the GPU, where each would be a
// CTA of its own. The channels run on threads of their own while the caller does what the GPU
// build's proxy thread will: keeps the network proxy moving slots (Progress::pollAll), watches the peers' processes
// and the communicator's abort flag, and raises the channels' abort word when one of them says
// stop. Positions in every FIFO (DevPort::cursor) persist from one operation to the next, as the
// FIFOs' counters do.
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/process.h"
#include "exec/cuda/host_threads.h"
#include "exec/executor.h"

namespace coll::exec {
namespace {

using dev::DevPort;
using dev::DevResult;
using dev::DevStep;
using dev::DevWork;
using Clock = std::chrono::steady_clock;

// One channel's work and where it reports. A p2p channel runs several works in order.
struct Channel : dev::ChannelWorks {
  DevResult result;
  bool ok = true;
};

class DeviceHostExecutor : public Executor {
 public:
  explicit DeviceHostExecutor(int nranks) : send_(nranks), recv_(nranks), sendConn_(nranks), recvConn_(nranks) {}
  const char* name() const override { return "device-host"; }

  Status run(const Work& w, const Links& links) override {
    COLL_TRY(refresh(links, w.opName));
    std::vector<Channel> channels;
    if (w.schedule) {
      if (w.schedule->empty()) return Status::ok();
      channels.resize(1);
      Channel& c = channels[0];
      c.steps.push_back(dev::toDevSteps(*w.schedule));
      DevWork dw = base(timeoutOf(w, links));
      dw.type = w.args.type;
      dw.op = w.args.op;  // core staged a PreMulSum's scaling: the op is a sum here
      dw.nranks = w.args.nranks;
      dw.input = w.args.input;
      dw.output = w.args.output;
      dw.scratch = w.args.scratch;
      if (w.check.print) std::memcpy(dw.print, w.check.print, sizeof(dw.print));
      c.works.push_back(dw);
    } else if (w.p2p) {
      p2pChannels(*w.p2p, timeoutOf(w, links), &channels);
    }
    if (channels.empty()) return Status::ok();
    for (Channel& c : channels)
      for (size_t i = 0; i < c.works.size(); ++i) {
        c.works[i].steps = c.steps[i].data();
        c.works[i].nsteps = static_cast<int>(c.steps[i].size());
        c.works[i].result = &c.result;
      }
    return launch(channels, links, w.opName, w.check);
  }

 private:
  // Ports for connections added since the last call; a port keeps its cursor for as long as its
  // connection exists.
  Status refresh(const Links& links, const char* opName) {
    if (generation_ == links.generation) return Status::ok();
    generation_ = links.generation;
    for (size_t p = 0; p < send_.size(); ++p) {
      COLL_TRY(adopt(links.sendTo[p], &sendConn_[p], &send_[p], opName));
      COLL_TRY(adopt(links.recvFrom[p], &recvConn_[p], &recv_[p], opName));
    }
    return Status::ok();
  }

  static Status adopt(transport::Connection* c, transport::Connection** had, DevPort* port, const char* opName) {
    if (c == *had) return Status::ok();
    *had = c;
    *port = DevPort{};
    if (!c) return Status::ok();
    const transport::ConnInfo& info = c->info();
    if (info.fifo.tagged)
      return COLL_ERROR(collInvalidUsage,
                        FMT_STRING("{}: the connection with rank {} publishes through tag lines, which the device "
                                   "executor does not read: set COLL_EXECUTOR equally on every rank"),
                        opName, info.peer);
    *port = dev::portOf(info);
    return Status::ok();
  }

  DevWork base(int64_t timeoutMs) {
    DevWork dw;
    dw.proto = dev::kSimple;
    dw.send = send_.data();
    dw.recv = recv_.data();
    dw.abortFlag = &abortWord_;
    dw.timeoutNs = static_cast<uint64_t>(timeoutMs) * 1000000ull;
    return dw;
  }

  // One channel per (peer, direction), each a CTA on the GPU (host_threads.h).
  void p2pChannels(const std::vector<P2POp>& ops, int64_t timeoutMs, std::vector<Channel>* out) {
    for (dev::ChannelWorks& c : dev::p2pChannels(ops, base(timeoutMs))) {
      out->emplace_back();
      static_cast<dev::ChannelWorks&>(out->back()) = std::move(c);
    }
  }

  // Runs every channel on its own thread and proxies for them until all are done.
  Status launch(std::vector<Channel>& channels, const Links& links, const char* opName, const CallCheck& check) {
    abortWord_ = 0;
    std::atomic<int> running{static_cast<int>(channels.size())};
    std::vector<std::thread> threads;
    threads.reserve(channels.size());
    for (Channel& c : channels)
      threads.emplace_back([&c, &running] {
        c.ok = dev::runWorksOnHost(dev::DevChannel{c.works.data(), static_cast<int32_t>(c.works.size())});
        running.fetch_sub(1, std::memory_order_release);
      });
    Status stop = proxy(links, opName, &channels, [&] { return running.load(std::memory_order_acquire) == 0; });
    if (!stop.isOk()) __atomic_store_n(&abortWord_, 1u, __ATOMIC_RELEASE);
    for (auto& t : threads) t.join();
    if (!stop.isOk()) return stop;
    if (links.wait) links.wait->progressed();  // what announceWait said is over
    for (const Channel& c : channels)
      if (!c.ok) return failure(c.result, links, opName, check);
    // Slots published on network connections must be on the network before the call returns.
    return proxy(links, opName, nullptr, [&] { return !links.progress->hasUnsentData(); });
  }

  // The proxy loop: network progress, the abort flag, the peers' processes, until done(). A peer
  // whose process is gone fails the call only while one of `channels` waits for it (DevResult's
  // recvWait, sendWait): one that exited after taking every byte sent to it ended nothing. Without
  // channels (the last sends' network flush), any dead peer with a connection fails it.
  template <typename Done>
  Status proxy(const Links& links, const char* opName, const std::vector<Channel>* channels, Done done) {
    auto lastCheck = Clock::now();
    for (uint64_t spin = 0; !done(); ++spin) {
      if (links.progress->empty()) {
        // Nothing to move: this loop only watches, so it leaves the cores to the channels.
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      } else {
        COLL_TRY(links.progress->pollAll());
        if (spin % 64 != 63) {
          dev::yieldOrNap();  // hands the core to a channel (portable.h)
          continue;
        }
      }
      if (links.abort && links.abort->load(std::memory_order_relaxed))
        return COLL_ERROR(collRemoteError, FMT_STRING("{} was aborted"), opName);
      auto now = Clock::now();
      if (now - lastCheck > std::chrono::milliseconds(100)) {
        lastCheck = now;
        if (channels && links.wait) announceWait(*channels, links.wait, now);
        for (size_t p = 0; p < links.localPids.size(); ++p) {
          int pid = links.localPids[p];
          bool used = sendConn_[p] || recvConn_[p];
          if (used && pid > 0 && (!channels || waitsFor(*channels, static_cast<int>(p))) && processGone(pid))
            return COLL_ERROR(collRemoteError, FMT_STRING("{}: rank {} (pid {}) died"), opName, p, pid);
        }
        // A peer that gave up (its notice: a mismatched call it saw, a rank that died) ends what
        // waits for it, as the CPU executor's waits and the device executor's proxy do.
        std::string notice = links.peerNotice ? links.peerNotice() : "";
        if (!notice.empty()) return COLL_ERROR(collRemoteError, FMT_STRING("{}"), notice);
      }
    }
    return Status::ok();
  }

  static bool waitsFor(const std::vector<Channel>& channels, int peer) {
    for (const Channel& c : channels)
      if (dev::waitsFor(c.result, peer)) return true;
    return false;
  }

  // Tells wait (a live view's, coll-top) whom the channels wait for and at which step, as the CPU
  // executor's waits do; clears it once none waits.
  static void announceWait(const std::vector<Channel>& channels, WaitState* wait, Clock::time_point now) {
    int peer = -1, step = -1;
    for (const Channel& c : channels)
      if (dev::waitingOn(c.result, &peer, &step)) break;
    if (peer >= 0)
      wait->waitsFor(peer, WaitState::toMs(now), step);
    else
      wait->progressed();
  }

  static Status failure(const DevResult& r, const Links& links, const char* opName, const CallCheck& check) {
    if (r.code == DevResult::kTimeout && links.wait && r.peer >= 0)
      links.wait->waitsFor(r.peer, WaitState::toMs(Clock::now()), r.step);
    return dev::failureStatus(r, opName, onHost(links, r.peer), check.describe, check.rank);
  }

  std::vector<DevPort> send_, recv_;
  std::vector<transport::Connection*> sendConn_, recvConn_;
  uint64_t generation_ = ~uint64_t(0);
  uint32_t abortWord_ = 0;  // raised by the proxy loop; the channels poll it
};

}  // namespace

std::unique_ptr<Executor> newDeviceHostExecutor(int nranks) { return std::make_unique<DeviceHostExecutor>(nranks); }

}  // namespace coll::exec
