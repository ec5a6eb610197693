// A rank's answers to a tool's status questions (coll-top), composed off the inbox thread.
//
// The inbox thread only hands the question's connection over (take()); a worker thread, started
// on the first question, answers from a snapshot of the rank's state (atomics read once), so a
// slow or stalled tool, or a host leader waiting for its host's ranks, never holds up the
// bootstrap messages the job itself depends on.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "bootstrap/status_wire.h"

namespace coll::bootstrap {

class StatusService {
 public:
  /// rank's own state, read when a question comes (must be callable from the worker thread).
  using Snapshot = std::function<JobStatus()>;

  /// table: every rank's RankInfo (inboxes and host hashes), as the rendezvous gave it.
  StatusService(int rank, uint64_t secret, std::vector<RankInfo> table, Snapshot snapshot);
  ~StatusService();
  StatusService(const StatusService&) = delete;
  StatusService& operator=(const StatusService&) = delete;

  /// Queues a tool's question with the connection to answer on; never blocks. Questions beyond a
  /// small backlog are dropped (their tools see the connection close).
  void take(net::Socket sock, const StatusQuestion& question);

 private:
  struct Job {
    net::Socket sock;
    StatusQuestion question;
  };
  void loop();
  void answer(Job& job);
  /// One HostEntry per rank of this rank's host, asking the others within timeoutMs.
  std::vector<HostEntry> gatherHost(int64_t timeoutMs);

  int rank_;
  uint64_t secret_;
  std::vector<RankInfo> table_;
  Snapshot snapshot_;
  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<Job> jobs_;  // guarded by mutex_
  std::atomic<bool> stop_{false};
  std::thread worker_;  // started by the first take()
};

}  // namespace coll::bootstrap
