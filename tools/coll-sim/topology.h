// The machine coll-sim models: nodes of ranks, the links inside and between them, and how fast a
// rank copies and reduces. A description is a text file of `key = value` lines (units in the
// names: GBs = GB/s per direction, Us = microseconds, Bytes accepts K/M/G suffixes), so that a
// user can describe a cluster we have never seen; built-in presets cover an 8xH100 node and this
// project's 2-core CI machine.
//
// What the network model assumes (network.h simulates it):
// - Inside a node every rank has one port out and one port in at intraGBs x intraEfficiency
//   (NVSwitch: any pair at full rate, no shared core). Efficiency is the share of the line rate
//   that carries data, after packet headers and flow control.
// - Between nodes a rank goes through NIC (local index x nicsPerNode / ranksPerNode), one port out
//   and one in per NIC at nicGBs x netEfficiency, and optionally a per-node cap on all network
//   traffic (nodeNetGBs: PCIe, host bridge). The fabric between NICs is non-blocking.
// - A transfer occupies every port on its path; transfers that share a port take turns, piece by
//   piece, in the order they asked for it (so two flows through one NIC get half each).
// - Latency is per piece and per path (intraLatencyUs, netLatencyUs); the slot counters that
//   return credit to the sender travel with the same latency.
// - Every call costs launchUs once (a kernel launch, or a host call's entry).
#pragma once

#include <cstddef>
#include <string>

namespace coll::sim {

struct Topology {
  std::string name = "custom";
  int nodes = 1;
  int ranksPerNode = 8;
  // Inside a node.
  double intraGBs = 450;
  double intraEfficiency = 1;
  double intraLatencyUs = 1;
  // Between nodes.
  int nicsPerNode = 1;
  double nicGBs = 50;
  double netEfficiency = 1;
  double netLatencyUs = 5;
  double nodeNetGBs = 0;  // 0: no cap beyond the NICs
  // A rank's own work: copying a received piece out of its slot, reducing one into local data.
  double copyGBs = 1000;
  double reduceGBs = 1000;
  double launchUs = 0;
  // The connection FIFO (COLL_BUFFSIZE / COLL_NSLOTS); chunks of ring steps are half of it, as in
  // the runtime (core/enqueue.cc).
  size_t fifoBytes = size_t(4) << 20;
  int slots = 8;

  int ranks() const { return nodes * ranksPerNode; }
  size_t slotBytes() const { return fifoBytes / static_cast<size_t>(slots); }
};

/// A built-in description by name ("dgx-h100", "vm"); false if there is none of that name.
bool presetTopology(const std::string& name, Topology* out);
/// Names of the presets, comma-separated (for usage lines).
const char* presetNames();

/// Applies one `key = value` line (comments after '#' and blank lines are fine); false with
/// *error saying why for an unknown key or a malformed or out-of-range value.
bool applySetting(const std::string& line, Topology* t, std::string* error);
/// Reads a description file over *t (which holds the defaults or a preset).
bool loadTopology(const std::string& path, Topology* t, std::string* error);
/// The description as a file that loadTopology reads back.
std::string describeTopology(const Topology& t);

}  // namespace coll::sim
