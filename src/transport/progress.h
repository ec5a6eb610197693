// The proxy work of one communicator, as its waiters see it: the network connections whose slots
// the process's network proxy (transport/proxy.h) moves between their FIFOs and the network.
//
// An executor only fills and drains FIFOs; for a network connection the proxy thread also hands
// filled slots to the network and lands arriving ones. A waiter (the CPU executor while it spins,
// the device executor's proxy loop, the tagged mailbox) calls poll(), which tells the proxy that
// somebody waits (it keeps spinning, or wakes up) and returns the error the proxy met on the
// connections the waiter depends on. Connections that need no proxy (shm) are not in it.
#pragma once

#include <vector>

#include "base/status.h"
#include "transport/proxy.h"
#include "transport/transport.h"

namespace coll::transport {

class Progress {
 public:
  /// Takes c (its sending end when sends) into the progress if it is proxied
  /// (c->info().proxied); otherwise, or if c is already in, does nothing.
  void add(Connection* c, bool sends);
  /// Whether any connection needs proxy work at all.
  bool empty() const { return conns_.empty(); }

  /// The executor's poll while it waits on a and/or b (either may be null or not proxied): wakes
  /// the proxy and returns its error on a, on b, or on a sending connection with slots not yet on
  /// the network (a peer that waits for them never lets the wait end). Never blocks.
  Status poll(Connection* a, Connection* b) {
    if (conns_.empty()) return Status::ok();
    proxy::demand();
    if (a && a->proxyFailed()) return a->proxyFailure();
    if (b && b->proxyFailed()) return b->proxyFailure();
    for (Connection* c : senders_)
      if (c->proxyFailed() && c->hasUnsentData()) return c->proxyFailure();
    return Status::ok();
  }
  /// The same for one operation's own connection.
  Status pollOne(Connection* c) {
    if (!c || !c->info().proxied) return Status::ok();
    proxy::demand();
    return c->proxyFailure();
  }
  /// The same for every network connection (what a device executor's proxy loop calls).
  Status pollAll();
  /// Whether a sending connection still holds slots that are not on the network yet.
  bool hasUnsentData() const;

 private:
  std::vector<Connection*> conns_;    // every proxied connection
  std::vector<Connection*> senders_;  // the proxied ones that send
};

}  // namespace coll::transport
