#include "core/flight_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "core/enqueue.h"

namespace coll {
namespace {

const char* stateName(int s) { return s == 0 ? "running" : s == 1 ? "completed" : "failed"; }

}  // namespace

FlightRecorder::FlightRecorder(int rank, int nranks, uint64_t commHash, size_t capacity, std::string dir)
    : rank_(rank),
      nranks_(nranks),
      commHash_(commHash),
      dir_(std::move(dir)),
      capacity_(capacity),
      ring_(capacity ? new Entry[capacity] : nullptr),
      nextPos_(capacity ? 1 % capacity : 0) {}

uint64_t FlightRecorder::start(const OpArgs* ops, size_t n) {
  // One thread at a time runs a communicator's operations (calls drain the host queue first), so
  // the counter needs no read-modify-write: it is atomic for a dump on another thread.
  uint64_t first = next_.load(std::memory_order_relaxed);
  next_.store(first + n, std::memory_order_release);
  if (capacity_ == 0) return first;
  uint64_t now = ticksNow();
  lastFirst_ = first;
  lastPos_ = nextPos_;
  for (size_t i = 0; i < n; ++i) {
    const OpArgs& a = ops[i];
    Entry& e = ring_[nextPos_];
    if (++nextPos_ == capacity_) nextPos_ = 0;
    e.seq.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // the zero is seen before any new field
    e.name.store(a.name, std::memory_order_relaxed);
    e.count.store(a.count, std::memory_order_relaxed);
    e.type.store(a.type, std::memory_order_relaxed);
    e.op.store(a.op, std::memory_order_relaxed);
    e.root.store(a.root, std::memory_order_relaxed);
    e.startTick.store(now, std::memory_order_relaxed);
    e.endTick.store(0, std::memory_order_relaxed);
    e.state.store(0, std::memory_order_relaxed);
    e.seq.store(first + i, std::memory_order_release);
  }
  return first;
}

void FlightRecorder::end(uint64_t first, size_t n, bool ok) {
  if (capacity_ == 0) return;
  mark(first, n, ok, first == lastFirst_ ? lastPos_ : first % capacity_);
}

void FlightRecorder::endElsewhere(uint64_t first, size_t n, bool ok) {
  if (capacity_ == 0) return;
  mark(first, n, ok, first % capacity_);
}

void FlightRecorder::mark(uint64_t first, size_t n, bool ok, size_t pos) {
  uint64_t now = ticksNow();
  for (uint64_t seq = first; seq < first + n; ++seq) {
    Entry& e = ring_[pos];
    if (++pos == capacity_) pos = 0;
    if (e.seq.load(std::memory_order_relaxed) != seq) continue;  // overwritten (capacity operations later)
    e.endTick.store(now, std::memory_order_relaxed);
    e.state.store(ok ? 1 : 2, std::memory_order_release);  // a reader that sees the state sees the end
  }
}

std::string FlightRecorder::toJson(const std::string& reason) const {
  std::lock_guard<std::mutex> lock(dumpMutex_);
  uint64_t next = next_.load(std::memory_order_acquire);
  nlohmann::json j;
  j["format"] = "coll-flight-1";
  j["comm"] = fmt::format("{:016x}", commHash_);
  j["rank"] = rank_;
  j["nranks"] = nranks_;
  j["pid"] = static_cast<int>(getpid());
  j["reason"] = reason;
  j["dumped_us"] = TickClock::nowWallUs();
  j["next_seq"] = next;
  nlohmann::json ops = nlohmann::json::array();
  // Oldest first: the ring holds sequence numbers next-capacity .. next-1.
  uint64_t first = next > capacity_ ? next - capacity_ : 1;
  for (uint64_t seq = first; seq < next && capacity_ > 0; ++seq) {
    const Entry& e = ring_[seq % capacity_];
    if (e.seq.load(std::memory_order_acquire) != seq) continue;  // being written, or overwritten
    int state = e.state.load(std::memory_order_acquire);
    const char* name = e.name.load(std::memory_order_relaxed);
    size_t count = e.count.load(std::memory_order_relaxed);
    int type = e.type.load(std::memory_order_relaxed), op = e.op.load(std::memory_order_relaxed);
    int root = e.root.load(std::memory_order_relaxed);
    uint64_t startTick = e.startTick.load(std::memory_order_relaxed);
    uint64_t endTick = e.endTick.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.seq.load(std::memory_order_relaxed) != seq) continue;  // rewritten while read
    ops.push_back({{"seq", seq},
                   {"name", name},
                   {"count", count},
                   {"type", type},
                   {"op", op},
                   {"root", root},
                   {"start_us", clock_.wallUs(startTick)},
                   {"end_us", state == 0 ? int64_t{0} : clock_.wallUs(endTick)},
                   {"state", stateName(state)}});
  }
  j["ops"] = std::move(ops);
  return j.dump(1);
}

std::string FlightRecorder::dump(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(dumpMutex_);
    if (dir_.empty() || dumped_) return "";
    dumped_ = true;
  }
  std::string text = toJson(reason);
  std::string path = fmt::format("{}/coll-flight-{:016x}-rank{}.json", dir_, commHash_, rank_);
  // 0600: the operations of a job are its own business.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ::close(fd);
  if (!ok) {
    COLL_LOG(WARN, INIT, "rank {}: cannot write the flight recorder to {}: {}", rank_, path, std::strerror(errno));
    return "";
  }
  COLL_LOG(WARN, INIT, "rank {}: last {} operations written to {} (read all ranks' files with coll-flight)", rank_,
           std::min<uint64_t>(next_.load() - 1, capacity_), path);
  return path;
}

}  // namespace coll
