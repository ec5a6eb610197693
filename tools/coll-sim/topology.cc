#include "topology.h"

#include <strings.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "algorithms/tuner.h"
#include "size_arg.h"

namespace coll::sim {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool parseNumber(const std::string& text, bool sizeSuffix, double* out) {
  if (text.empty()) return false;
  // Byte sizes go through the tools' one size parser (K/M/G suffixes), as coll-perf's -b/-e do.
  if (sizeSuffix) return colltools::parseSizeValue(text.c_str(), out);
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || !std::isfinite(v)) return false;
  if (!trim(end).empty()) return false;
  *out = v;
  return true;
}

// One row per key: the field it sets (exactly one of the three), the range it accepts.
struct Key {
  const char* name;
  double Topology::*real;
  int Topology::*integer;
  size_t Topology::*bytes;
  double lo, hi;
  const char* doc;
};

constexpr Key real(const char* name, double Topology::*f, double lo, double hi, const char* doc) {
  return {name, f, nullptr, nullptr, lo, hi, doc};
}
constexpr Key integer(const char* name, int Topology::*f, double lo, double hi, const char* doc) {
  return {name, nullptr, f, nullptr, lo, hi, doc};
}

const Key kKeys[] = {
    integer("nodes", &Topology::nodes, 1, 65536, "nodes"),
    integer("ranks_per_node", &Topology::ranksPerNode, 1, 1024, "ranks on each node (GPUs, or CPU processes)"),
    real("intra_GBs", &Topology::intraGBs, 1e-3, 1e6, "line rate of a rank's port inside its node, per direction"),
    real("intra_efficiency", &Topology::intraEfficiency, 1e-3, 1, "share of intra_GBs that carries data"),
    real("intra_latency_us", &Topology::intraLatencyUs, 0, 1e6, "one piece's latency inside a node"),
    integer("nics_per_node", &Topology::nicsPerNode, 1, 1024,
            "NICs on each node; rank i of a node uses NIC i x nics / ranks"),
    real("nic_GBs", &Topology::nicGBs, 1e-3, 1e6, "line rate of one NIC, per direction"),
    real("net_efficiency", &Topology::netEfficiency, 1e-3, 1, "share of nic_GBs that carries data"),
    real("net_latency_us", &Topology::netLatencyUs, 0, 1e6, "one piece's latency between nodes"),
    real("node_net_GBs", &Topology::nodeNetGBs, 0, 1e6, "cap on a node's network traffic per direction (0: none)"),
    real("copy_GBs", &Topology::copyGBs, 1e-3, 1e6, "a rank copying a received piece out of its slot"),
    real("reduce_GBs", &Topology::reduceGBs, 1e-3, 1e6, "a rank reducing a received piece into local data"),
    real("launch_us", &Topology::launchUs, 0, 1e6, "fixed cost of one call on each rank"),
    {"fifo_bytes", nullptr, nullptr, &Topology::fifoBytes, 1024, 1e12,
     "FIFO per connection and direction (COLL_BUFFSIZE)"},
    integer("slots", &Topology::slots, 2, 64, "slots per FIFO (COLL_NSLOTS)"),
};

}  // namespace

const char* presetNames() { return "dgx-h100, vm"; }

bool presetTopology(const std::string& name, Topology* out) {
  Topology t;
  if (strcasecmp(name.c_str(), "dgx-h100") == 0) {
    // One DGX H100 (nodes = N for a cluster of them): 8 GPUs on NVSwitch, NVLink 4 at 450 GB/s
    // per direction, about 20% of which is protocol overhead (NVIDIA, nccl-tests issue 212); 8
    // ConnectX-7 at 400 Gb/s (50 GB/s), one per GPU. Latencies are NCCL's own ring/Simple
    // constants (src/graph/tuning.cc): 3.4 us a hop on NVLink, 9.6 us on the network, 8.4 us a
    // call. A GPU copies and reduces at HBM3 speed: 3.35 TB/s read + write, so about 1.6 TB/s
    // copied and 1.1 TB/s reduced (two reads and a write).
    t.name = "dgx-h100";
    t.nodes = 1;
    t.ranksPerNode = 8;
    t.intraGBs = 450;
    t.intraEfficiency = 0.8;
    t.intraLatencyUs = 3.4;
    t.nicsPerNode = 8;
    t.nicGBs = 50;
    t.netEfficiency = 0.95;
    t.netLatencyUs = 9.6;
    t.copyGBs = 1600;
    t.reduceGBs = 1100;
    t.launchUs = 8.4;
  } else if (strcasecmp(name.c_str(), "vm") == 0) {
    // This project's CI machine: 2 ranks (one per core) over shm, with the tuner's fitted shm
    // constants (algorithms/tuner.cc), and TCP's between "nodes" (measured over loopback).
    algorithms::CostModel shm = algorithms::shmModel(), tcp = algorithms::tcpModel();
    t.name = "vm";
    t.nodes = 1;
    t.ranksPerNode = 2;
    t.intraGBs = shm.betaGBs;
    t.intraEfficiency = 1;
    t.intraLatencyUs = shm.alphaUs;
    t.nicsPerNode = 1;
    t.nicGBs = tcp.betaGBs;
    t.netEfficiency = 1;
    t.netLatencyUs = tcp.alphaUs;
    t.copyGBs = shm.betaGBs;
    t.reduceGBs = shm.gammaGBs;
    t.launchUs = 0;
  } else {
    return false;
  }
  *out = t;
  return true;
}

bool applySetting(const std::string& rawLine, Topology* t, std::string* error) {
  std::string line = trim(rawLine.substr(0, rawLine.find('#')));
  if (line.empty()) return true;
  size_t eq = line.find('=');
  if (eq == std::string::npos) return *error = "expected key = value, got '" + line + "'", false;
  std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
  if (key == "name") return t->name = value, true;
  const Key* k = nullptr;
  for (const Key& candidate : kKeys)
    if (key == candidate.name) k = &candidate;
  if (!k) {
    *error = "unknown key '" + key + "' (known: name";
    for (const Key& candidate : kKeys) *error += std::string(", ") + candidate.name;
    return *error += ")", false;
  }
  double v;
  if (!parseNumber(value, k->bytes != nullptr, &v) || (!k->real && v != std::floor(v)))
    return *error = std::string(k->name) + ": not a valid number: '" + value + "'", false;
  if (v < k->lo || v > k->hi) {
    std::ostringstream os;
    os << k->name << " = " << value << " is out of range [" << k->lo << ", " << k->hi << "]";
    return *error = os.str(), false;
  }
  if (k->real) t->*k->real = v;
  if (k->integer) t->*k->integer = static_cast<int>(v);
  if (k->bytes) t->*k->bytes = static_cast<size_t>(v);
  return true;
}

bool loadTopology(const std::string& path, Topology* t, std::string* error) {
  std::ifstream in(path);
  if (!in) return *error = "cannot open " + path, false;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (!applySetting(line, t, error)) return *error = path + ":" + std::to_string(n) + ": " + *error, false;
  return true;
}

std::string describeTopology(const Topology& t) {
  std::ostringstream os;
  os << "# coll-sim topology (GBs: GB/s per direction; us: microseconds)\n";
  os << "name = " << t.name << "\n";
  for (const Key& k : kKeys) {
    os << k.name << " = ";
    if (k.real) os << t.*k.real;
    if (k.integer) os << t.*k.integer;
    if (k.bytes) os << t.*k.bytes;
    os << "  # " << k.doc << "\n";
  }
  return os.str();
}

}  // namespace coll::sim
