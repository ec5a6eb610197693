#include "core/flight_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/log.h"
#include "core/enqueue.h"

namespace coll {
namespace {

int64_t wallUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* stateName(int s) { return s == 0 ? "running" : s == 1 ? "completed" : "failed"; }

}  // namespace

FlightRecorder::FlightRecorder(int rank, int nranks, uint64_t commHash, size_t capacity, std::string dir)
    : rank_(rank), nranks_(nranks), commHash_(commHash), dir_(std::move(dir)), ring_(capacity) {}

uint64_t FlightRecorder::start(const std::vector<OpArgs>& ops) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t first = next_;
  next_ += ops.size();
  if (ring_.empty()) return first;
  int64_t now = wallUs();
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpArgs& a = ops[i];
    Entry& e = ring_[(first + i) % ring_.size()];
    e = Entry{};
    e.seq = first + i;
    e.name = a.name;
    e.count = a.count;
    e.type = a.type;
    e.op = a.op;
    e.root = a.root;
    e.startUs = now;
  }
  return first;
}

void FlightRecorder::end(uint64_t first, size_t n, bool ok) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ring_.empty()) return;
  int64_t now = wallUs();
  for (uint64_t seq = first; seq < first + n; ++seq) {
    Entry& e = ring_[seq % ring_.size()];
    if (e.seq != seq) continue;  // overwritten meanwhile (more than capacity operations later)
    e.endUs = now;
    e.state = ok ? 1 : 2;
  }
}

std::string FlightRecorder::toJson(const std::string& reason) const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json j;
  j["format"] = "coll-flight-1";
  j["comm"] = fmt::format("{:016x}", commHash_);
  j["rank"] = rank_;
  j["nranks"] = nranks_;
  j["pid"] = static_cast<int>(getpid());
  j["reason"] = reason;
  j["dumped_us"] = wallUs();
  j["next_seq"] = next_;
  nlohmann::json ops = nlohmann::json::array();
  // Oldest first: the ring holds sequence numbers next_-size .. next_-1.
  uint64_t first = next_ > ring_.size() ? next_ - ring_.size() : 1;
  for (uint64_t seq = first; seq < next_ && !ring_.empty(); ++seq) {
    const Entry& e = ring_[seq % ring_.size()];
    if (e.seq != seq) continue;
    ops.push_back({{"seq", e.seq},
                   {"name", e.name},
                   {"count", e.count},
                   {"type", e.type},
                   {"op", e.op},
                   {"root", e.root},
                   {"start_us", e.startUs},
                   {"end_us", e.endUs},
                   {"state", stateName(e.state)}});
  }
  j["ops"] = std::move(ops);
  return j.dump(1);
}

std::string FlightRecorder::dump(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
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
           std::min<uint64_t>(next_ - 1, ring_.size()), path);
  return path;
}

}  // namespace coll
