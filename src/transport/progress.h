// The proxy work of one communicator: moving the slots of its network connections between their
// FIFOs and the network.
//
// An executor only fills and drains FIFOs; for a network connection, something must also hand
// filled slots to the network and land arriving ones. That is this object's job, written once
// for every network transport. Whoever waits on the communicator drives it: the CPU executor
// calls poll() while it spins (so the sends and receives of a step overlap without a thread),
// and a proxy thread would call pollAll() for a GPU executor, whose kernels cannot call send().
// One thread at a time drives a Progress; connections that need no proxy (shm) are not in it.
#pragma once

#include <vector>

#include "base/status.h"
#include "transport/transport.h"

namespace coll::transport {

class Progress {
 public:
  /// Takes c (its sending end when sends) into the progress if it is proxied
  /// (c->info().proxied); otherwise, or if c is already in, does nothing.
  void add(Connection* c, bool sends);
  /// Whether any connection needs proxy work at all.
  bool empty() const { return conns_.empty(); }

  /// The executor's poll while it waits on a and/or b (either may be null or not proxied): moves
  /// their slots, and those of every sending connection with slots not yet on the network (a peer
  /// that waits for them never lets the wait end). Never blocks.
  Status poll(Connection* a, Connection* b) {
    if (conns_.empty()) return Status::ok();
    if (a && a->info().proxied) COLL_TRY(a->progress());
    if (b && b != a && b->info().proxied) COLL_TRY(b->progress());
    for (Connection* c : senders_)
      if (c != a && c != b && c->hasUnsentData()) COLL_TRY(c->progress());
    return Status::ok();
  }
  /// Moves c's slots if it is proxied (one operation's own connection).
  Status pollOne(Connection* c) { return c && c->info().proxied ? c->progress() : Status::ok(); }
  /// Moves the slots of every network connection once (what a proxy thread loops on).
  Status pollAll();
  /// Whether a sending connection still holds slots that are not on the network yet.
  bool hasUnsentData() const;

 private:
  std::vector<Connection*> conns_;    // every proxied connection
  std::vector<Connection*> senders_;  // the proxied ones that send
};

}  // namespace coll::transport
