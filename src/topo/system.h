// The machine as coll sees it: CPU packages and their NUMA nodes, the PCI tree under each host
// bridge, GPUs (with NVLink peers) and NICs, and the host's identity. Built by detect.cc from
// hwloc, sysfs, the CUDA driver and ibverbs, or read from a topology file (topo_file.h) so that
// a DGX-like node or a two-socket server can be replayed on a machine that has neither.
//
// Paths between two endpoints are classified as NCCL does (paths.h): the same device, NVLink, one
// PCIe switch, several switches, through a host bridge, across sockets, or over the network.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace coll::topo {

/// A NUMA node and the package (socket) it belongs to.
struct NumaNode {
  int id = 0;
  int package = 0;
  int cores = 0;
  uint64_t memoryBytes = 0;
};

/// Where a PCI device sits: its NUMA node and the chain of PCI bridges/switches from the host
/// bridge down to it ("hb0", "hb0/sw1", ...; the first is the host bridge).
struct PciPlace {
  std::string busId;               // "0000:18:00.0"; empty for virtual devices
  int numa = -1;                   // -1: unknown (then treated as NUMA node 0)
  std::vector<std::string> chain;  // bridges from the host bridge down; empty: virtual device
  double linkGBs = 0;              // the device's PCIe link, per direction (0: unknown)
};

struct Gpu {
  int index = 0;  // CUDA device index
  std::string name;
  PciPlace pci;
  int nvswitchLinks = 0;  // NVLinks to NVSwitches (every GPU on the switches is a peer)
  struct Link {
    std::string peerBusId;
    int count = 0;
  };
  std::vector<Link> nvlinks;  // direct NVLinks to other GPUs
  double nvlinkGBsPerLink = 25;
};

struct Nic {
  std::string name;    // netdev ("eth0") or verbs device ("mlx5_0")
  std::string netdev;  // the network interface, if any
  std::string kind;    // "ethernet", "ib", "roce", "virtual", "loopback"
  PciPlace pci;
  double speedGBs = 0;  // per direction; 0: unknown
  int port = 0;         // verbs port, for ib/roce
  std::string gid;      // verbs GID, for ib/roce
};

struct System {
  std::string host;    // host name
  std::string hostId;  // what tells hosts apart (core/host_id.h)
  std::string source;  // "detected (hwloc 2.9.0)" or the file it was read from
  std::vector<NumaNode> numa;
  int packages = 0;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::string error;  // detection problems that were worked around (empty: none)
};

/// The NUMA node of a PCI place (0 when unknown).
int numaOf(const System& s, const PciPlace& p);
/// The package of a NUMA node (0 when unknown).
int packageOf(const System& s, int numa);

}  // namespace coll::topo
