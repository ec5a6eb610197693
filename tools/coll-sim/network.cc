#include "network.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace coll::sim {
namespace {

using algorithms::Buf;
using algorithms::Prim;
using algorithms::Schedule;
using algorithms::Step;

constexpr double kNever = std::numeric_limits<double>::infinity();

// GB/s is bytes per nanosecond: bytes / GBs / 1000 is microseconds.
double us(double bytes, double GBs) { return bytes / GBs / 1e3; }

struct Port {
  double GBs = 0;
  double freeAt = 0;
};

// One direction of a connection: its path, and the pieces and slot releases in flight.
struct Conn {
  int src = 0, dst = 0;
  std::vector<int> ports;
  double GBs = 0;  // the path's bottleneck
  double latencyUs = 0;
  bool network = false;
  std::deque<double> arrivals;  // pieces sent and not yet received: when each lands
  std::deque<double> releases;  // when the receiver freed slot of piece (releaseBase + i)
  uint64_t releaseBase = 0;
  uint64_t sent = 0, received = 0;
};

enum class Kind { kDone, kLocal, kSend, kRecv, kFused };

struct Plan {
  Kind kind = Kind::kDone;
  double when = kNever;  // kNever: blocked on something not yet known
};

struct RankState {
  Schedule sched;
  size_t step = 0;
  size_t sentBytes = 0, gotBytes = 0;
  bool localDone = false;
  double clock = 0;
  double busy = 0;
  uint64_t version = 0;
};

bool bothWays(Prim p) { return p == Prim::kSendRecv || p == Prim::kSendRecvReduce; }
bool isLocal(Prim p) { return p == Prim::kCopy || p == Prim::kReduceBlocks; }
bool reduces(Prim p) {
  return p == Prim::kRecvReduceSend || p == Prim::kRecvReduceCopy || p == Prim::kRecvReduceCopySend ||
         p == Prim::kSendRecvReduce;
}

class Simulator {
 public:
  Simulator(const Topology& t, size_t elem) : t_(t), n_(t.ranks()), elem_(elem) {
    slot_ = std::max<size_t>(elem, t.slotBytes() / elem * elem);
    int nics = t.nodes * t.nicsPerNode;
    ports_.resize(2 * n_ + 2 * nics + 2 * t.nodes);
    for (int r = 0; r < n_; ++r) ports_[rankOut(r)].GBs = ports_[rankIn(r)].GBs = t.intraGBs * t.intraEfficiency;
    for (int i = 0; i < nics; ++i) ports_[nicOut(i)].GBs = ports_[nicIn(i)].GBs = t.nicGBs * t.netEfficiency;
    for (int h = 0; h < t.nodes; ++h) ports_[nodeOut(h)].GBs = ports_[nodeIn(h)].GBs = t.nodeNetGBs;
    ranks_.resize(n_);
  }

  SimResult run(const std::function<Schedule(int)>& schedule) {
    for (int r = 0; r < n_; ++r) {
      ranks_[r].sched = schedule(r);
      ranks_[r].clock = t_.launchUs;
      for (const Step& st : ranks_[r].sched) {
        if (st.sendPeer >= 0) conn(r, st.sendPeer);
        if (st.recvPeer >= 0) conn(st.recvPeer, r);
      }
    }
    for (int r = 0; r < n_; ++r) replan(r);
    while (!queue_.empty()) {
      Entry e = queue_.top();
      queue_.pop();
      if (e.version != ranks_[e.rank].version) continue;
      execute(e.rank);
    }
    SimResult res;
    res.pieces = pieces_;
    res.netBytes = netBytes_;
    res.intraBytes = intraBytes_;
    std::ostringstream why;
    int stuck = 0;
    for (int r = 0; r < n_; ++r) {
      res.timeUs = std::max(res.timeUs, ranks_[r].clock);
      res.busyUs.push_back(ranks_[r].busy);
      if (plan(r).kind == Kind::kDone) continue;
      if (stuck++ < 6) why << (stuck > 1 ? "; " : "") << waitingFor(r);
    }
    if (stuck) {
      res.error = "deadlock: " + std::to_string(stuck) + " rank(s) cannot move: " + why.str();
      return res;
    }
    for (const Conn& c : conns_)
      if (!c.arrivals.empty()) {
        res.error = std::to_string(c.arrivals.size()) + " piece(s) from rank " + std::to_string(c.src) + " to rank " +
                    std::to_string(c.dst) + " never received";
        return res;
      }
    res.ok = true;
    return res;
  }

 private:
  struct Entry {
    double when;
    int rank;
    uint64_t version;
    bool operator<(const Entry& o) const { return when > o.when || (when == o.when && rank > o.rank); }
  };

  int rankOut(int r) const { return r; }
  int rankIn(int r) const { return n_ + r; }
  int nicOf(int r) const {
    int local = r % t_.ranksPerNode;
    return (r / t_.ranksPerNode) * t_.nicsPerNode + local * t_.nicsPerNode / t_.ranksPerNode;
  }
  int nicOut(int i) const { return 2 * n_ + i; }
  int nicIn(int i) const { return 2 * n_ + t_.nodes * t_.nicsPerNode + i; }
  int nodeOut(int h) const { return 2 * n_ + 2 * t_.nodes * t_.nicsPerNode + h; }
  int nodeIn(int h) const { return nodeOut(h) + t_.nodes; }

  Conn& conn(int src, int dst) {
    uint64_t key = static_cast<uint64_t>(src) << 32 | static_cast<uint32_t>(dst);
    auto it = index_.find(key);
    if (it != index_.end()) return conns_[it->second];
    Conn c;
    c.src = src;
    c.dst = dst;
    if (src == dst) {
      c.GBs = t_.copyGBs;  // to oneself: a local copy through the slots
    } else if (src / t_.ranksPerNode == dst / t_.ranksPerNode) {
      c.ports = {rankOut(src), rankIn(dst)};
      c.latencyUs = t_.intraLatencyUs;
    } else {
      c.ports = {nicOut(nicOf(src)), nicIn(nicOf(dst))};
      if (t_.nodeNetGBs > 0) {
        c.ports.push_back(nodeOut(src / t_.ranksPerNode));
        c.ports.push_back(nodeIn(dst / t_.ranksPerNode));
      }
      c.latencyUs = t_.netLatencyUs;
      c.network = true;
    }
    if (!c.ports.empty()) {
      c.GBs = kNever;
      for (int p : c.ports) c.GBs = std::min(c.GBs, ports_[p].GBs);
    }
    index_.emplace(key, conns_.size());
    conns_.push_back(std::move(c));
    return conns_.back();
  }

  size_t sendTotal(const Step& st) const { return st.sendPeer < 0 ? 0 : st.count * elem_; }
  size_t recvTotal(const Step& st) const {
    return st.recvPeer < 0 ? 0 : (bothWays(st.prim) ? st.recvElems() : st.count) * elem_;
  }

  // When the next piece on c may go: a slot is free once the receiver released the piece `slots`
  // before it, and the sender has seen that.
  double creditTime(const Conn& c) const {
    if (c.sent < static_cast<uint64_t>(t_.slots)) return 0;
    uint64_t need = c.sent - static_cast<uint64_t>(t_.slots);
    if (need >= c.received) return kNever;
    return c.releases[need - c.releaseBase] + c.latencyUs;
  }
  double arrivalTime(const Conn& c) const { return c.arrivals.empty() ? kNever : c.arrivals.front(); }

  // Moves rank r past finished steps; then what it can do next and from when.
  Plan plan(int r) {
    RankState& s = ranks_[r];
    while (s.step < s.sched.size()) {
      const Step& st = s.sched[s.step];
      bool finished = isLocal(st.prim) ? s.localDone : s.sentBytes >= sendTotal(st) && s.gotBytes >= recvTotal(st);
      if (!finished) break;
      ++s.step;
      s.sentBytes = s.gotBytes = 0;
      s.localDone = false;
    }
    Plan p;
    if (s.step == s.sched.size()) return p;
    const Step& st = s.sched[s.step];
    if (isLocal(st.prim)) return {Kind::kLocal, s.clock};
    bool wantSend = s.sentBytes < sendTotal(st), wantRecv = s.gotBytes < recvTotal(st);
    double send = wantSend ? creditTime(conn(r, st.sendPeer)) : kNever;
    double recv = wantRecv ? arrivalTime(conn(st.recvPeer, r)) : kNever;
    if (bothWays(st.prim)) {
      // Over the same memory a piece is received only once what it overwrites was sent.
      bool same = st.src == st.dst && st.srcOff == st.dstOff;
      size_t k = std::min(slot_, recvTotal(st) - s.gotBytes);
      if (wantRecv && same && s.sentBytes < std::min(sendTotal(st), s.gotBytes + k)) recv = kNever;
      if (send <= recv) return {Kind::kSend, std::max(s.clock, send)};
      return {Kind::kRecv, std::max(s.clock, recv)};
    }
    if (wantSend && wantRecv) return {Kind::kFused, std::max({s.clock, send, recv})};
    if (wantSend) return {Kind::kSend, std::max(s.clock, send)};
    return {Kind::kRecv, std::max(s.clock, recv)};
  }

  std::string waitingFor(int r) {
    const RankState& s = ranks_[r];
    const Step& st = s.sched[s.step];
    std::ostringstream os;
    os << "rank " << r << " step " << s.step;
    bool wantRecv = s.gotBytes < recvTotal(st);
    if (wantRecv && arrivalTime(conn(st.recvPeer, r)) == kNever)
      os << " waits for a piece from rank " << st.recvPeer;
    else if (st.sendPeer >= 0)
      os << " waits for a free slot at rank " << st.sendPeer;
    return os.str();
  }

  void replan(int r) {
    RankState& s = ranks_[r];
    ++s.version;
    Plan p = plan(r);
    if (p.when < kNever) queue_.push({p.when, r, s.version});
  }

  // Puts `bytes` on c's path no earlier than `ready`; returns when the transfer ends.
  double transmit(Conn& c, size_t bytes, double ready) {
    double start = ready;
    for (int p : c.ports) start = std::max(start, ports_[p].freeAt);
    for (int p : c.ports) ports_[p].freeAt = start + us(static_cast<double>(bytes), ports_[p].GBs);
    double end = start + us(static_cast<double>(bytes), c.GBs);
    c.arrivals.push_back(end + c.latencyUs);
    ++c.sent;
    ++pieces_;
    (c.network ? netBytes_ : intraBytes_) += static_cast<double>(bytes);
    return end;
  }

  void release(Conn& c, double when) {
    c.arrivals.pop_front();
    c.releases.push_back(when);
    ++c.received;
    // Keep only the releases a future credit check can still ask for.
    uint64_t keepFrom = c.sent >= static_cast<uint64_t>(t_.slots) ? c.sent - t_.slots : 0;
    while (c.releaseBase < keepFrom && !c.releases.empty()) {
      c.releases.pop_front();
      ++c.releaseBase;
    }
  }

  void execute(int r) {
    Plan p = plan(r);
    RankState& s = ranks_[r];
    const Step& st = s.sched[s.step];
    double t = p.when;
    int wakeSender = -1, wakeReceiver = -1;
    if (p.kind == Kind::kLocal) {
      double bytes = static_cast<double>(st.count * elem_);
      if (st.prim == Prim::kReduceBlocks)
        s.clock = t + us(bytes * n_, t_.reduceGBs);
      else
        s.clock = t + (st.src == st.dst && st.srcOff == st.dstOff ? 0 : us(bytes, t_.copyGBs));
      s.localDone = true;
    } else {
      bool send = p.kind == Kind::kSend || p.kind == Kind::kFused;
      bool recv = p.kind == Kind::kRecv || p.kind == Kind::kFused;
      size_t ks = send ? std::min(slot_, sendTotal(st) - s.sentBytes) : 0;
      size_t kr = recv ? std::min(slot_, recvTotal(st) - s.gotBytes) : 0;
      double local = recv ? us(static_cast<double>(kr), reduces(st.prim) ? t_.reduceGBs : t_.copyGBs) : 0;
      double end = t + local;
      if (send) {
        Conn& c = conn(r, st.sendPeer);
        end = std::max(end, transmit(c, ks, t));
        s.sentBytes += ks;
        wakeReceiver = st.sendPeer;
      }
      if (recv) {
        release(conn(st.recvPeer, r), end);
        s.gotBytes += kr;
        wakeSender = st.recvPeer;
      }
      s.clock = end;
    }
    s.busy += s.clock - t;
    replan(r);
    if (wakeReceiver >= 0 && wakeReceiver != r) replan(wakeReceiver);
    if (wakeSender >= 0 && wakeSender != r && wakeSender != wakeReceiver) replan(wakeSender);
  }

  const Topology& t_;
  int n_;
  size_t elem_;
  size_t slot_;
  std::vector<Port> ports_;
  std::vector<RankState> ranks_;
  std::vector<Conn> conns_;
  std::unordered_map<uint64_t, size_t> index_;
  std::priority_queue<Entry> queue_;
  size_t pieces_ = 0;
  double netBytes_ = 0, intraBytes_ = 0;
};

}  // namespace

SimResult simulate(const Topology& t, size_t elemBytes, const std::function<Schedule(int rank)>& schedule) {
  Simulator sim(t, elemBytes);
  return sim.run(schedule);
}

}  // namespace coll::sim
