// The bootstrap: out-of-band TCP messaging among the ranks of one communicator.
//
// How it works: each rank opens an inbox (a listener served by its own thread) on the interface
// chosen by COLL_SOCKET_IFNAME, then sends a Hello with its RankInfo to the root named by the
// collUniqueId and waits for the root's answer: the RankInfo of every rank, inbox addresses
// included. Then any rank can message any other: send() opens a connection to the peer's inbox,
// writes one framed message and closes; the peer's inbox thread reads it into a queue keyed by
// (source rank, tag), where recv() finds it. Because the receiving side always drains, sends never
// deadlock against each other, whatever the order of sends and receives. allGather() is a ring
// over send/recv (n-1 steps of one slot); init ends with one all-gather that proves every inbox is
// reachable and every rank holds the same table. A rank whose all-gather fails sends an abort
// notice to all peers, whose waits then end at once naming the cause. Every wait has the communicator's deadline and
// stops at once when the abort flag is raised.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/ifaddr.h"
#include "base/wait_state.h"
#include "bootstrap/bootstrap_wire.h"
#include "bootstrap/status_service.h"
#include "bootstrap/unique_id.h"

namespace coll::bootstrap {

struct Options {
  int64_t timeoutMs = 60000;
  const std::atomic<bool>* abort = nullptr;  // owned by the communicator; may be raised from any thread
  /// How long an incoming connection may take to present the job's secret (COLL_HANDSHAKE_TIMEOUT_MS).
  int64_t handshakeMs = 3000;
  /// Bytes of messages nobody waits for yet that the inbox holds, in all and per peer
  /// (COLL_BOOTSTRAP_INBOX_BYTES, COLL_BOOTSTRAP_INBOX_PEER_BYTES).
  uint64_t inboxBytes = 64ull << 20;
  uint64_t inboxPeerBytes = 16ull << 20;
  /// What this rank's operations wait for, told to peers that ask (null: answer "nothing").
  std::shared_ptr<WaitState> wait;
};

class Bootstrap {
 public:
  /// Rendezvous with the root of `id` and exchange RankInfo with every rank. Blocking, up to
  /// options.timeoutMs (plus a grace period so that the root's answer, which names missing ranks,
  /// arrives before the rank's own deadline).
  static Result<std::unique_ptr<Bootstrap>> create(const IdContents& id, int rank, int nranks, RankInfo mine,
                                                   const Options& options);
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const std::vector<RankInfo>& peers() const { return peers_; }
  /// "rank 3 (pid 1234 on host-a)", for messages.
  std::string describe(int peer) const;

  /// Sends size bytes to peer under tag. Returns once the bytes are in the kernel's socket buffer
  /// (or the peer's inbox has them). Blocking up to the deadline. tag must not have the top bit set.
  Status send(int peer, uint64_t tag, const void* data, size_t size);
  /// Receives the next message from peer under tag; its size must be exactly `size`.
  Status recv(int peer, uint64_t tag, void* data, size_t size);
  /// recv() that keeps waiting after another rank's failure notice (collCommShrink: the survivors
  /// talk on while a rank they exclude has died); it still ends when peer itself is gone.
  Status recvDespiteFailures(int peer, uint64_t tag, void* data, size_t size);
  /// send()/recv() for variable-size messages.
  Status sendBytes(int peer, uint64_t tag, const std::vector<char>& data) {
    return send(peer, tag, data.data(), data.size());
  }
  Result<std::vector<char>> recvBytes(int peer, uint64_t tag);
  /// recvBytes() that, while it waits, shows watch() each message from peer under watchTag
  /// (left queued): a non-empty answer ends the wait with collInvalidUsage and that sentence
  /// (connection setup: the peer wants something else of this rank than what it waits for).
  Result<std::vector<char>> recvBytesWatching(int peer, uint64_t tag, uint64_t watchTag,
                                              const std::function<std::string(const std::vector<char>&)>& watch);
  /// The communicator's secret, which later connections (TCP data sockets) present too.
  uint64_t secret() const { return secret_; }
  /// The interface this rank's inbox listens on; TCP connections use it too.
  const net::Interface& interface() const { return iface_; }

  /// Gathers bytesPerRank bytes from every rank: data holds nranks slots; slot rank() is the input.
  Status allGather(void* data, size_t bytesPerRank);
  /// Returns when every rank has entered the barrier.
  Status barrier();

  /// For a failure of this rank in any protocol (bootstrap or data path): if a peer's abort
  /// notice explains it (the failure was a consequence), returns that cause; then tells every
  /// peer, best effort, so that their waits end now with the cause instead of a timeout or a
  /// "closed connection" from a rank that merely failed too.
  Status shareFailure(Status local);

  /// Asks peer what its current operation waits for; an error when it does not answer within
  /// timeoutMs (a stopped or hung process) or cannot be reached.
  Result<WaitAnswer> askWhatPeerWaitsFor(int peer, int64_t timeoutMs);
  /// The first abort notice a peer sent, waiting up to graceMs for one; "" if none came.
  std::string peerFailure(int graceMs);
  /// Whether a peer's failure notice has come (a relaxed load: cheap enough for every call).
  bool failureNoticed() const { return failureNoticed_.load(std::memory_order_relaxed); }
  /// True when peer runs on this host (another process) and that process no longer exists.
  bool peerProcessGone(int peer) const;

 private:
  /// Tells every peer that this rank failed and why (short deadline per peer).
  void notifyPeersOfFailure(const Status& why);
  /// Gives an abort notice in flight a moment to arrive; returns it in place of local if one came.
  Status preferPeerFailure(Status local);

  Bootstrap(int rank, int nranks, uint64_t secret, const Options& options);
  Status startInbox(const net::Address& bindAddr);
  Status rendezvous(const IdContents& id, RankInfo mine);
  Status ringAllGather(void* data, size_t bytesPerRank);
  /// timeoutMs < 0: the communicator's bootstrap timeout.
  Status sendRaw(int peer, uint64_t tag, const void* data, size_t size, int64_t timeoutMs = -1);
  Result<std::vector<char>> recvRaw(int peer, uint64_t tag, int64_t timeoutMs = -1, bool despiteFailures = false,
                                    uint64_t watchTag = 0,
                                    const std::function<std::string(const std::vector<char>&)>* watch = nullptr);
  /// Answers a peer's kTagWaitQuery from options_.wait (on the inbox thread, short deadline).
  void answerWaitQuery(int peer, const std::vector<char>& question);
  /// What this rank's operation waits for now (options_.wait), as both questions are answered.
  WaitAnswer waitSnapshot() const;
  /// This rank's state as a tool is told it (read from atomics: any thread may take it).
  JobStatus statusSnapshot() const;

  void inboxLoop();
  /// The inbox's admission check: reserves a message's bytes within the bounds of Options, or
  /// says why not (and makes the rank's next wait fail naming the sender).
  std::string admit(const MsgHeader& h);
  /// Gives back what admit() reserved for a message of payloadBytes from src (releaseLocked: with
  /// mutex_ held).
  void release(int src, uint64_t payloadBytes);
  void releaseLocked(int src, uint64_t payloadBytes);
  /// What holding a message costs beyond its payload (its queue entry), counted against the
  /// inbox bounds: a flood of empty messages is bounded like one of full ones.
  static constexpr uint64_t kHeldMessageBytes = 64;
  static uint64_t heldCost(uint64_t payloadBytes) { return payloadBytes + kHeldMessageBytes; }

  int rank_;
  int nranks_;
  uint64_t secret_;
  Options options_;
  std::vector<RankInfo> peers_;
  std::vector<net::Address> peerAddrs_;
  uint64_t collectiveSeq_ = 0;
  std::atomic<uint32_t> questions_{0};  // numbers this rank's wait queries, so late answers match none
  std::atomic<bool> formed_{false};     // peers_, peerAddrs_ and status_ are made: the inbox thread may reply

  std::unique_ptr<MessageServer> server_;
  std::unique_ptr<StatusService> status_;  // answers tools; made with the table, before formed_
  net::Interface iface_;
  std::thread inboxThread_;
  int wakeFd_ = -1;
  std::atomic<bool> stopInbox_{false};
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<std::pair<int, uint64_t>, std::deque<std::vector<char>>> inbox_;  // guarded by mutex_
  std::string peerFailure_;                  // guarded by mutex_: the first abort notice received, with its sender
  std::atomic<bool> failureNoticed_{false};  // peerFailure_ is set
  std::vector<uint64_t> heldBytes_;          // guarded by mutex_: per source rank, admitted and not yet received
  uint64_t heldTotal_ = 0;                   // guarded by mutex_
};

}  // namespace coll::bootstrap
