#include "algorithms/symbolic.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace coll::algorithms {
namespace {

// Element `index` of the inputs of ranks [lo, lo + len) mod n, reduced; len 0: never written;
// len kFragmented: the ranks are the intervals arena_[lo].
constexpr uint32_t kFragmented = ~uint32_t(0);
struct Rec {
  uint32_t index = 0;
  uint32_t lo = 0;
  uint32_t len = 0;
};

bool sameMemory(Collective c) { return c != Collective::kAllToAll; }  // all-to-all in place is staged by enqueue

// One rank's memory: input and output are windows of `mem` (the same window when in place).
struct RankMem {
  std::vector<Rec> mem;
  size_t inOff = 0, inLen = 0, outOff = 0, outLen = 0;
  std::vector<Rec> scratch;
};

class Runner {
 public:
  Runner(const SymbolicCall& call, const std::function<Schedule(int)>& make) : call_(call), n_(call.nranks) {
    ranks_.resize(n_);
    schedules_.resize(n_);
    pc_.assign(n_, 0);
    sent_.assign(n_, false);
    inbox_.resize(n_);
    for (int r = 0; r < n_; ++r) {
      schedules_[r] = make(r);
      report_.maxStepsOnRank = std::max(report_.maxStepsOnRank, schedules_[r].size());
      layout(r);
    }
  }

  SymbolicReport run() {
    std::vector<int> work;
    std::vector<char> queued(n_, 1);
    for (int r = n_ - 1; r >= 0; --r) work.push_back(r);
    while (!work.empty() && error_.empty()) {
      int r = work.back();
      work.pop_back();
      queued[r] = 0;
      advance(r, [&](int woken) {
        if (!queued[woken]) {
          queued[woken] = 1;
          work.push_back(woken);
        }
      });
    }
    if (error_.empty()) checkFinished();
    if (error_.empty()) checkResult();
    report_.ok = error_.empty();
    report_.error = error_;
    return report_;
  }

 private:
  void layout(int r) {
    RankMem& m = ranks_[r];
    size_t in = inputElems(call_, r), out = outputElems(call_, r), c = call_.count;
    if (call_.inPlace && sameMemory(call_.collective)) {
      size_t total = std::max(in, out);
      m.mem.assign(total, Rec{});
      m.inLen = in;
      m.outLen = out;
      if (call_.collective == Collective::kReduceScatter) m.outOff = static_cast<size_t>(r) * c;
      if (call_.collective == Collective::kAllGather) m.inOff = static_cast<size_t>(r) * c;
    } else {
      m.mem.assign(in + out, Rec{});
      m.inLen = in;
      m.outOff = in;
      m.outLen = out;
    }
    for (size_t i = 0; i < in; ++i) m.mem[m.inOff + i] = Rec{static_cast<uint32_t>(i), static_cast<uint32_t>(r), 1};
    m.scratch.assign(scratchElems(schedules_[r]), Rec{});
  }

  void fail(int r, size_t pc, const std::string& what) {
    if (!error_.empty()) return;
    std::ostringstream os;
    os << "rank " << r << " step " << pc << ": " << what;
    error_ = os.str();
  }

  // The elements a step names, or nullptr (after fail) when outside the buffer.
  Rec* region(int r, size_t pc, Buf b, size_t off, size_t count) {
    RankMem& m = ranks_[r];
    size_t base = 0, len = 0;
    std::vector<Rec>* v = &m.mem;
    if (b == Buf::kInput) base = m.inOff, len = m.inLen;
    if (b == Buf::kOutput) base = m.outOff, len = m.outLen;
    if (b == Buf::kScratch) v = &m.scratch, len = m.scratch.size();
    if (off > len || count > len - off) {
      const char* names[] = {"input", "output", "scratch"};
      fail(r, pc,
           "elements [" + std::to_string(off) + ", " + std::to_string(off + count) + ") are outside the " +
               names[static_cast<int>(b)] + " buffer of " + std::to_string(len));
      return nullptr;
    }
    return v->data() + base + off;
  }

  using Interval = std::pair<uint32_t, uint32_t>;  // ranks [first, second), no wrap

  // The ranks of a record as sorted plain intervals.
  void intervals(const Rec& a, std::vector<Interval>* out) const {
    out->clear();
    if (a.len == kFragmented) {
      *out = arena_[a.lo];
      return;
    }
    uint32_t n = static_cast<uint32_t>(n_);
    if (a.lo + a.len <= n) {
      out->push_back({a.lo, a.lo + a.len});
    } else {
      out->push_back({0, a.lo + a.len - n});
      out->push_back({a.lo, n});
    }
  }

  // a (op) b, into a record: the checks of the header.
  bool unite(int r, size_t pc, const Rec& a, const Rec& b, Rec* out) {
    if (a.len == 0 || b.len == 0) return fail(r, pc, "reduces an element that was never written"), false;
    if (a.index != b.index)
      return fail(r, pc, "reduces element " + std::to_string(a.index) + " with element " + std::to_string(b.index)),
             false;
    intervals(a, &ia_);
    intervals(b, &ib_);
    merged_.clear();
    std::merge(ia_.begin(), ia_.end(), ib_.begin(), ib_.end(), std::back_inserter(merged_));
    joined_.clear();
    for (const Interval& iv : merged_) {
      if (!joined_.empty() && iv.first < joined_.back().second)
        return fail(r, pc, "counts rank " + std::to_string(iv.first) + " twice in element " + std::to_string(a.index)),
               false;
      if (!joined_.empty() && iv.first == joined_.back().second)
        joined_.back().second = iv.second;
      else
        joined_.push_back(iv);
    }
    uint32_t n = static_cast<uint32_t>(n_);
    if (joined_.size() == 1) {
      *out = Rec{a.index, joined_[0].first, joined_[0].second - joined_[0].first};
    } else if (joined_.size() == 2 && joined_[0].first == 0 && joined_[1].second == n) {
      *out = Rec{a.index, joined_[1].first, n - joined_[1].first + joined_[0].second};  // wraps around
    } else {
      arena_.push_back(joined_);
      *out = Rec{a.index, static_cast<uint32_t>(arena_.size() - 1), kFragmented};
    }
    return true;
  }

  std::deque<std::vector<Rec>>& queue(int from, int to) { return inbox_[to][from]; }

  template <typename Wake>
  void advance(int r, Wake wake) {
    const Schedule& s = schedules_[r];
    while (pc_[r] < s.size() && error_.empty()) {
      size_t pc = pc_[r];
      const Step& st = s[pc];
      if (st.count == 0 && st.recvElems() == 0) {
        ++pc_[r];
        continue;
      }
      bool sendsFirst = st.prim == Prim::kSendRecv || st.prim == Prim::kSendRecvReduce;
      if (sendsFirst && !sent_[r]) {
        Rec* src = region(r, pc, st.src, st.srcOff, st.count);
        Rec* dst = src ? region(r, pc, st.dst, st.dstOff, st.recvElems()) : nullptr;
        if (!dst) return;
        // The executor interleaves the two directions piece by piece: a receive must not land on
        // elements still to be sent, except kSendRecvReduce over exactly the same elements.
        bool overlap = src < dst + st.recvElems() && dst < src + st.count;
        bool same = src == dst && st.count == st.recvElems();
        if (overlap && !(st.prim == Prim::kSendRecvReduce && same))
          return fail(r, pc, "receives into elements it is still sending");
        send(r, st.sendPeer, std::vector<Rec>(src, src + st.count), wake);
        sent_[r] = true;
      }
      std::vector<Rec> msg;
      if (st.recvPeer >= 0 && st.recvElems() > 0) {
        auto& q = queue(st.recvPeer, r);
        if (q.empty()) return;  // blocked: woken by the sender
        msg = std::move(q.front());
        q.pop_front();
        if (msg.size() != st.recvElems())
          return fail(r, pc,
                      "receives " + std::to_string(st.recvElems()) + " elements but rank " +
                          std::to_string(st.recvPeer) + " sent " + std::to_string(msg.size()));
      }
      if (!execute(r, pc, st, msg, wake)) return;
      sent_[r] = false;
      ++pc_[r];
      ++report_.steps;
    }
  }

  template <typename Wake>
  void send(int r, int to, std::vector<Rec> msg, Wake wake) {
    if (to < 0 || to >= n_) return fail(r, pc_[r], "sends to rank " + std::to_string(to));
    if (msg.empty()) return;  // the executor sends nothing for nothing
    report_.elementsMoved += msg.size();
    queue(r, to).push_back(std::move(msg));
    wake(to);
  }

  template <typename Wake>
  bool execute(int r, size_t pc, const Step& st, std::vector<Rec>& msg, Wake wake) {
    size_t c = st.count;
    switch (st.prim) {
      case Prim::kSend: {
        Rec* src = region(r, pc, st.src, st.srcOff, c);
        if (!src) return false;
        send(r, st.sendPeer, std::vector<Rec>(src, src + c), wake);
        return true;
      }
      case Prim::kRecv:
      case Prim::kRecvCopySend:
      case Prim::kSendRecv: {
        Rec* dst = region(r, pc, st.dst, st.dstOff, msg.size());
        if (!dst) return false;
        std::copy(msg.begin(), msg.end(), dst);
        if (st.prim == Prim::kRecvCopySend) send(r, st.sendPeer, std::move(msg), wake);
        return true;
      }
      case Prim::kRecvReduceSend:
      case Prim::kRecvReduceCopy:
      case Prim::kRecvReduceCopySend: {
        Rec* src = region(r, pc, st.src, st.srcOff, c);
        if (!src) return false;
        std::vector<Rec> out(c);
        for (size_t i = 0; i < c; ++i)
          if (!unite(r, pc, msg[i], src[i], &out[i])) return false;
        if (st.prim != Prim::kRecvReduceSend) {
          Rec* dst = region(r, pc, st.dst, st.dstOff, c);
          if (!dst) return false;
          std::copy(out.begin(), out.end(), dst);
        }
        if (st.prim != Prim::kRecvReduceCopy) send(r, st.sendPeer, std::move(out), wake);
        return true;
      }
      case Prim::kSendRecvReduce: {
        Rec* dst = region(r, pc, st.dst, st.dstOff, msg.size());
        if (!dst) return false;
        for (size_t i = 0; i < msg.size(); ++i)
          if (!unite(r, pc, msg[i], dst[i], &dst[i])) return false;
        return true;
      }
      case Prim::kCopy: {
        Rec* src = region(r, pc, st.src, st.srcOff, c);
        Rec* dst = src ? region(r, pc, st.dst, st.dstOff, c) : nullptr;
        if (!dst) return false;
        std::vector<Rec> tmp(src, src + c);
        std::copy(tmp.begin(), tmp.end(), dst);
        return true;
      }
      case Prim::kReduceBlocks: {
        Rec* blocks = region(r, pc, Buf::kScratch, 0, c * static_cast<size_t>(n_));
        Rec* dst = blocks ? region(r, pc, st.dst, st.dstOff, c) : nullptr;
        if (!dst) return false;
        std::vector<Rec> acc(blocks, blocks + c);
        for (int b = 1; b < n_; ++b)
          for (size_t i = 0; i < c; ++i)
            if (!unite(r, pc, acc[i], blocks[b * c + i], &acc[i])) return false;
        for (size_t i = 0; i < c; ++i)
          if (acc[i].len == 0) return fail(r, pc, "reduces a block that was never written"), false;
        std::copy(acc.begin(), acc.end(), dst);
        return true;
      }
    }
    fail(r, pc, "unknown primitive");
    return false;
  }

  void checkFinished() {
    std::ostringstream os;
    int stuck = 0;
    for (int r = 0; r < n_ && stuck < 4; ++r) {
      if (pc_[r] >= schedules_[r].size()) continue;
      const Step& st = schedules_[r][pc_[r]];
      os << (stuck++ ? "; " : "") << "rank " << r << " waits at step " << pc_[r] << " for rank " << st.recvPeer;
    }
    if (stuck) {
      error_ = "deadlock: " + os.str();
      return;
    }
    for (int to = 0; to < n_; ++to)
      for (auto& [from, q] : inbox_[to])
        if (!q.empty()) {
          error_ = "rank " + std::to_string(from) + " sent rank " + std::to_string(to) + " " +
                   std::to_string(q.size()) + " message(s) never received";
          return;
        }
  }

  // What output element i of rank r must hold.
  bool expected(int r, size_t i, Rec got, std::string* why) const {
    size_t c = call_.count;
    uint32_t full = static_cast<uint32_t>(n_);
    auto want = [&](size_t index, uint32_t lo, uint32_t len) {
      bool ok = got.len == len && got.index == index && (len == full || got.lo == lo);
      if (got.len == kFragmented) got.len = 0;  // not a whole set: reported as such below
      if (!ok)
        *why = "holds element " + std::to_string(got.index) + " of ranks " + std::to_string(got.lo) + "+" +
               std::to_string(got.len) + ", expected element " + std::to_string(index) + " of ranks " +
               (len == full ? std::string("all") : std::to_string(lo));
      return ok;
    };
    switch (call_.collective) {
      case Collective::kAllReduce:
      case Collective::kReduce:
        return want(i, 0, full);
      case Collective::kReduceScatter:
        return want(static_cast<size_t>(r) * c + i, 0, full);
      case Collective::kAllGather:
        return want(i % c, static_cast<uint32_t>(i / c), 1);
      case Collective::kBroadcast:
        return want(i, static_cast<uint32_t>(call_.root), 1);
      case Collective::kAllToAll:
        return want(static_cast<size_t>(r) * c + i % c, static_cast<uint32_t>(i / c), 1);
    }
    return false;
  }

  void checkResult() {
    for (int r = 0; r < n_; ++r) {
      const RankMem& m = ranks_[r];
      for (size_t i = 0; i < m.outLen; ++i) {
        std::string why;
        if (!expected(r, i, m.mem[m.outOff + i], &why)) {
          error_ = "rank " + std::to_string(r) + " output element " + std::to_string(i) + " " + why;
          return;
        }
      }
    }
  }

  SymbolicCall call_;
  int n_;
  std::vector<RankMem> ranks_;
  std::vector<Schedule> schedules_;
  std::vector<size_t> pc_;
  std::vector<char> sent_;
  std::vector<std::unordered_map<int, std::deque<std::vector<Rec>>>> inbox_;  // [to][from]
  std::string error_;
  SymbolicReport report_;
  std::vector<std::vector<Interval>> arena_;  // rank sets that are not one cyclic interval
  std::vector<Interval> ia_, ib_, merged_, joined_;
};

}  // namespace

size_t inputElems(const SymbolicCall& call, int rank) {
  size_t c = call.count, n = static_cast<size_t>(call.nranks);
  switch (call.collective) {
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return n * c;
    case Collective::kBroadcast:
      return rank == call.root ? c : 0;
    default:
      return c;
  }
}

size_t outputElems(const SymbolicCall& call, int rank) {
  size_t c = call.count, n = static_cast<size_t>(call.nranks);
  switch (call.collective) {
    case Collective::kAllGather:
    case Collective::kAllToAll:
      return n * c;
    case Collective::kReduce:
      return rank == call.root ? c : 0;
    default:
      return c;
  }
}

SymbolicReport runSymbolic(const SymbolicCall& call, const std::function<Schedule(int rank)>& schedule) {
  if (call.nranks < 1) return SymbolicReport{false, "nranks must be at least 1"};
  return Runner(call, schedule).run();
}

}  // namespace coll::algorithms
