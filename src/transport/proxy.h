// The process's network proxy: one thread that makes every call into a network provider
// (net/net.h), as NCCL's proxy thread does.
//
// Why one thread: providers (sockets, UCX workers, NCCL plugins) are not written for several
// callers at once, and a communicator's setup thread, its executor and the device executor's
// proxy would otherwise all call them. Here nothing else does:
//   - setup and close (listen, connect, accept, registration, close) are posted with run(), which
//     waits for the proxy to have run them;
//   - the data path needs no posting: a network connection's FIFO is the queue. The executor
//     publishes a slot (head) and the proxy, which moves every attached connection in each of its
//     rounds (Connection::progress), hands it to the network; arriving messages are landed in the
//     slots and published the same way. Waiters call demand(), which costs two loads while the
//     proxy is awake, and learn of a connection's failure from Connection::proxyFailure().
// The proxy spins while anybody demanded its work within the last COLL_PROXY_SPIN_US or a sending
// connection still has slots on their way (a small message then pays no sleep and no wake-up);
// with only connection setups under way it runs a round every 50 us; otherwise it sleeps until
// the next demand or post.
// Where a host has fewer cores than threads (ranks, each with its proxy), a proxy thread that
// spins takes half a core from the ranks: an 8-byte all-reduce over TCP at 2 ranks on 2 cores
// took 18.8 us against 9.8 with the executor calling the provider itself. There (setCrowded, or
// COLL_NET_PROXY=waiters) a waiting thread runs the round itself, holding the proxy's token, so
// one thread at a time still calls the providers; the proxy thread keeps the posted calls and the
// setups. The same holds for 2 s at a time while the machine's runnable threads exceed its cores
// (base/cpu_load.h: other jobs, or hosts simulated in network namespaces of one machine).
#pragma once

#include <functional>

#include "base/status.h"

namespace coll::transport {

class Connection;

namespace proxy {

/// Runs fn on the proxy thread (started on first use) and returns its status once it ran; on the
/// proxy thread itself, runs it at once. Setup and close of network connections go through here.
Status run(const std::function<Status()>& fn);
/// The proxy moves c in every round from now on (c->progress()), until detach(c). Sending ends
/// (first) are moved before receiving ones in each round, so that what a round's waiter published
/// leaves before the round polls for arrivals. Only inside run().
void attach(Connection* c, bool first);
/// The proxy no longer touches c once this returns. Only inside run().
void detach(Connection* c);
/// Tells the proxy that a thread waits on its work: it keeps spinning, or wakes up. Cheap enough
/// for every spin of a wait.
void demand();
/// Tells the proxy whether a communicator of this process has more threads than cores on its host
/// (each rank's own and a proxy). From the first crowded one on (COLL_NET_PROXY=auto), a waiter
/// runs the proxy's round itself under the proxy's token instead of waiting for the proxy thread,
/// which would compete with it for a core; the thread then runs only posted calls and setups.
void setCrowded(bool crowded);
/// Whether the calling thread is the proxy.
bool onProxyThread();
/// The proxy's round, counted from 1 (inside a round): what is done once per round for several
/// connections (a provider's poll) is keyed by it.
uint64_t roundNumber();

}  // namespace proxy
}  // namespace coll::transport
