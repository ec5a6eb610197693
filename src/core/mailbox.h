// Tagged messages with MPI's matching (collIsend / collIrecv, coll.h): the receive engine.
//
// A Mailbox belongs to a user communicator and owns an internal one (a split of it, every pair of
// ranks connected at creation) whose connections only its progress thread touches. A message is
// one header piece (tag and size) followed by its bytes in pieces of up to a slot, on the
// connection from its sender: per (source, tag) the order of sending is the order of arrival.
//
// Matching happens where a header arrives: the oldest posted receive that names its source (or
// any) and its tag (or any) takes it, and its bytes are copied straight into that receive's
// buffer. When none does, the message is held (copied into memory of the mailbox) until a receive
// that fits it is posted; posting first looks through what is held, oldest first. What is held is
// bounded (COLL_P2P_UNEXPECTED_BYTES): past it, the mailbox's receives fail with a sentence naming
// the sender. Messages to this rank itself go through the same matching without a connection.
//
// The thread runs while requests are pending and sleeps otherwise (a post wakes it); it waits with
// growing naps when nothing moves, so that it leaves the cores to computation. It ends requests on
// a dead or leaving peer (for receives from any source too) and at their deadlines.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "coll/coll.h"

struct collComm;

namespace coll {

/// One tagged send or receive. The caller's handle and the mailbox share it; the fields below the
/// line are the mailbox's (under its mutex), the outcome is under the request's own.
struct MsgRequest {
  bool isSend = false;
  int peer = COLL_ANY_SOURCE;  // destination, or source (COLL_ANY_SOURCE)
  int tag = 0;                 // >= 0, or COLL_ANY_TAG (receives)
  char* buf = nullptr;
  size_t bytes = 0;  // a send's message; a receive's room
  int64_t timeoutMs = 0;
  // collDataType_t of its elements, which a message and the receive that takes it must share
  // (MPI's type matching; COLL_CHECK_CALLS): -1 when the check is off, and then never compared.
  int type = -1;

  /// Waits until done; returns the outcome.
  Status wait(collMsgStatus_t* status);
  /// Whether done (then the outcome is in *result and *status).
  bool test(Status* result, collMsgStatus_t* status);
  /// Ends the request once (later calls are ignored).
  void finish(Status result, const collMsgStatus_t& status);

  // --- the mailbox's
  std::chrono::steady_clock::time_point lastMoved;
  bool withdrawn = false;   // freed by its owner: its buffer is no longer written or read
  std::vector<char> owned;  // a withdrawn send's bytes, copied (buf then points here)

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status result_;
  collMsgStatus_t status_{};
};

class Mailbox {
 public:
  /// Takes inner (a split of the user communicator, all pairs connected) and starts the thread.
  explicit Mailbox(collComm* inner);
  ~Mailbox();  // shutdown() must have run

  /// Queues a send or posts a receive; fails at once (nothing queued) when the peer is known to
  /// be gone or the mailbox has failed.
  Status post(const std::shared_ptr<MsgRequest>& r);
  /// The owner freed r: a receive not matched yet is withdrawn, a matched one drops the rest of
  /// its message, a send goes on from a copy of its bytes. The caller's buffer is free after it.
  void withdraw(const std::shared_ptr<MsgRequest>& r);
  /// Ends every pending request with `why`, stops the thread and releases the internal
  /// communicator (aborted when abort, else destroyed).
  void shutdown(const char* why, bool abort);

 private:
  struct Header;
  struct Held {  // a message that arrived before its receive
    int source = -1;
    int tag = 0;
    int type = -1;  // the sender's (MsgRequest::type)
    std::vector<char> data;
    size_t got = 0;
    std::shared_ptr<MsgRequest> claimedBy;  // a receive posted while its bytes still arrive
  };
  struct Outbox {  // sends to one peer, in posting order
    std::deque<std::shared_ptr<MsgRequest>> queue;
    bool headerSent = false;
    size_t sent = 0;  // bytes of queue.front() published
    uint64_t cursor = 0, tailSeen = 0;
  };
  struct Inbound {  // the message arriving from one peer
    bool active = false;
    int tag = 0;
    int type = -1;  // the sender's (MsgRequest::type)
    size_t bytes = 0, got = 0;
    char* into = nullptr;  // nullptr: dropped (a receive too small for it failed)
    std::shared_ptr<MsgRequest> req;
    std::list<Held>::iterator held;
    bool toHeld = false;
    uint64_t cursor = 0;  // kept across messages (the FIFO's position)
    /// Between messages again, at the same place in the FIFO.
    void reset() { *this = Inbound{false, 0, -1, 0, 0, nullptr, nullptr, {}, false, cursor}; }
  };

  void run();
  /// One pass over every connection: moves what can move now. True when anything moved.
  bool pass();
  bool pumpSends(int peer, std::chrono::steady_clock::time_point now);
  bool pumpRecvs(int peer, std::chrono::steady_clock::time_point now);
  /// A header from peer: the receive it goes to, or a Held entry.
  Status route(int peer, const char* piece, size_t n);
  /// Where a message (source, tag, bytes, type) goes when r takes it: false (and r failed) when
  /// r's room is smaller or, both checking, its type is another.
  bool fits(const std::shared_ptr<MsgRequest>& r, int source, int tag, size_t bytes, int type);
  void completeInbound(int peer);
  /// A message to this rank itself.
  void deliverLocal(const std::shared_ptr<MsgRequest>& send);
  /// Takes a message already held for r, if one matches: true when r was handled.
  bool matchHeld(const std::shared_ptr<MsgRequest>& r);
  /// Ends every request that involves peer (and every receive from any source) with s.
  void failPeer(int peer, const Status& s);
  void checkPeers();
  void checkDeadlines(std::chrono::steady_clock::time_point now);
  bool pending() const;

  collComm* inner_;
  int rank_, nranks_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<Outbox> out_;
  std::vector<Inbound> in_;
  std::list<std::shared_ptr<MsgRequest>> posted_;  // receives not matched yet, oldest first
  std::list<Held> held_;                           // in order of arrival
  size_t heldBytes_ = 0;
  size_t heldLimit_;
  std::vector<std::string> gone_;  // by peer: why it can no longer take part ("" while it can)
  Status failed_;                  // the bound of held messages was passed: receives fail so
  std::chrono::steady_clock::time_point lastLiveness_;
  std::thread thread_;
};

}  // namespace coll
