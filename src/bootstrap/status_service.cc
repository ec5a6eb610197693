#include "bootstrap/status_service.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace coll::bootstrap {
namespace {

// Questions waiting for the worker beyond which new ones are dropped: a tool asks one at a time,
// so a longer queue only means someone floods the inbox with the secret.
constexpr size_t kMaxQueued = 16;

// How long an answer may take to leave: the tool gives up after its own timeout anyway.
constexpr int64_t kSendMs = 1000;

}  // namespace

StatusService::StatusService(int rank, uint64_t secret, std::vector<RankInfo> table, Snapshot snapshot)
    : rank_(rank), secret_(secret), table_(std::move(table)), snapshot_(std::move(snapshot)) {}

StatusService::~StatusService() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  queued_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void StatusService::take(net::Socket sock, const StatusQuestion& question) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stop_.load() || jobs_.size() >= kMaxQueued) return;  // sock closes here
  jobs_.push_back({std::move(sock), question});
  if (!worker_.joinable()) worker_ = std::thread([this] { loop(); });
  queued_.notify_one();
}

void StatusService::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queued_.wait(lock, [this] { return stop_.load() || !jobs_.empty(); });
      if (stop_.load()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    answer(job);
  }
}

void StatusService::answer(Job& job) {
  std::vector<char> payload;
  switch (job.question.kind) {
    case kAskSelf: {
      JobStatus st = snapshot_();
      payload.resize(sizeof(st));
      std::memcpy(payload.data(), &st, sizeof(st));
      break;
    }
    case kAskTable: {
      payload.resize(table_.size() * sizeof(TableEntry));
      for (size_t r = 0; r < table_.size(); ++r) {
        TableEntry e{table_[r].listen, table_[r].hostHash};
        std::memcpy(payload.data() + r * sizeof(e), &e, sizeof(e));
      }
      break;
    }
    case kAskHost: {
      int64_t timeoutMs = std::clamp<int64_t>(job.question.timeoutMs, 1, 60000);
      std::vector<HostEntry> entries = gatherHost(timeoutMs);
      payload.resize(entries.size() * sizeof(HostEntry));
      std::memcpy(payload.data(), entries.data(), payload.size());
      break;
    }
    default:
      return;  // an unknown question: the tool sees the connection close
  }
  (void)sendMessage(job.sock, makeHeader(secret_, kTagStatusAnswer, payload.size(), rank_), payload.data(),
                    net::Deadline::afterMs(kSendMs), &stop_, "a status question");
}

std::vector<HostEntry> StatusService::gatherHost(int64_t timeoutMs) {
  const uint64_t host = table_[static_cast<size_t>(rank_)].hostHash;
  std::vector<int> others;
  std::vector<net::Address> addrs;
  for (size_t r = 0; r < table_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || table_[r].hostHash != host) continue;
    auto a = table_[r].listen.unpack();
    if (!a.isOk()) continue;  // checked at the rendezvous: cannot happen
    others.push_back(static_cast<int>(r));
    addrs.push_back(*a);
  }
  // Every other rank of the host at once; the snapshot of this rank is taken meanwhile.
  std::vector<StatusAnswer> answers =
      askStatusAll(addrs, secret_, StatusQuestion{kAskSelf, 0}, timeoutMs, sizeof(JobStatus), &stop_);
  std::vector<HostEntry> entries;
  entries.reserve(others.size() + 1);
  entries.push_back({rank_, kAnswered, snapshot_()});
  for (size_t i = 0; i < others.size(); ++i) {
    HostEntry e{};
    e.rank = others[i];
    Result<JobStatus> st =
        answers[i].isOk() ? decodeSelfAnswer(reinterpret_cast<const uint8_t*>(answers[i]->data()), answers[i]->size())
                          : Result<JobStatus>(answers[i].status());
    if (st.isOk() && st->rank == e.rank) {
      e.state = kAnswered;
      e.st = *st;
    } else {
      Status why = st.isOk() ? Status(collRemoteError, "answered as another rank") : st.status();
      e.state = why.code() == collTimeout ? kNotAnswering : kMissing;
      e.st.rank = e.rank;
      e.st.wait.waitingFor = -1;
      std::snprintf(e.st.detail, sizeof(e.st.detail), "%s", why.message().c_str());
    }
    entries.push_back(e);
  }
  return entries;
}

}  // namespace coll::bootstrap
