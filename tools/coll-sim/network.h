// The network simulator: runs every rank's schedule (the runtime's own, from algorithms/catalog.h)
// piece by piece over the ports of a Topology, as the CPU executor moves them through slots.
//
// Each rank is one engine that does one thing at a time, in schedule order, as the executor does:
// a piece received (waiting for it to arrive), then copied out or reduced; a piece sent (waiting
// for a free slot at the receiver, then for the ports on its path); a fused step (receive, reduce,
// send) takes the longer of its reduction and its transfer. Steps that both send and receive
// (recursive doubling) interleave their pieces as the executor does, taking whichever is possible
// first. Events run in time order, so ports are granted in the order transfers ask for them.
//
// Bounded FIFOs are modeled (topology slots), so a schedule that needs more buffering than a
// connection has ends in a deadlock report naming the ranks and what they wait for, as it would
// hang at run time; the symbolic verifier, with unbounded queues, cannot see that.
//
// Not modeled: channels (one engine per rank; the runtime has none yet), protocols other than
// Simple's slots, the single-copy path for large CPU pieces, reduction cost differences between
// types, and congestion inside the network fabric.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "topology.h"

namespace coll::sim {

struct SimResult {
  bool ok = false;
  std::string error;           // deadlock or unreceived messages, with the ranks involved
  double timeUs = 0;           // when the last rank finished (launch included)
  size_t pieces = 0;           // pieces moved, all ranks
  double netBytes = 0;         // bytes that crossed between nodes
  double intraBytes = 0;       // bytes moved between ranks of one node
  std::vector<double> busyUs;  // per rank: time spent copying, reducing and sending (not waiting)
};

/// Runs schedule(r) for every rank of t over t's ports, elemBytes per element.
SimResult simulate(const Topology& t, size_t elemBytes, const std::function<algorithms::Schedule(int rank)>& schedule);

}  // namespace coll::sim
