// Which of a network's devices a rank uses: the ones nearest its GPU (a device communicator) or
// its CPU's NUMA node, as NCCL picks a NIC per GPU. Devices are placed in this host's topology
// (COLL_TOPO_FILE or detection) by the PCI bus id that ends their sysfs path; the nearest are
// those of the best path class and, within it, the highest bandwidth. A rank then spreads its
// connections over them in turn (plugin_provider.cc), so several NICs at equal distance all
// carry traffic.
#pragma once

#include <string>
#include <vector>

#include "transport/net/net.h"

namespace coll::transport::net {

/// A device as the locality choice sees it: its name and its sysfs PCI path (NCCL's pciPath;
/// empty or unknown when the network gives none).
struct DeviceSpot {
  std::string name;
  std::string pciPath;
};

/// Indices into devices of those nearest the rank that config describes (numa, cudaDev), in
/// index order; all of them when the topology places none (or cannot be loaded). Never empty
/// for a non-empty list. *why (when given) says what decided, for the log and coll-info.
std::vector<int> nearestDevices(const std::vector<DeviceSpot>& devices, const Config& config,
                                std::string* why = nullptr);

}  // namespace coll::transport::net
