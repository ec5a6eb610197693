// Which of a network's devices a rank uses: the ones nearest its GPU (a device communicator) or
// its CPU's NUMA node, as NCCL picks a NIC per GPU. Devices are placed in this host's topology
// (COLL_TOPO_FILE or detection) by the PCI bus id that ends their sysfs path; the nearest are
// those of the best path class and, within it, the highest bandwidth. A rank then spreads its
// connections over them in turn (plugin_provider.cc), so several NICs at equal distance all
// carry traffic.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "topo/ib_probe.h"
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

/// The RDMA ports UCX should use for the rank that config describes, in UCX_NET_DEVICES's
/// spelling ("mlx5_4:1,mlx5_5:1"): the active ports of the devices nearest the rank. Empty when
/// there is no choice to make (fewer than two active ports, or the nearest are all of them: the
/// topology places none, or all are at one distance), and UCX then picks its devices itself.
/// pciPathOf gives a device's sysfs PCI path (sysfsPciPath on a real host). *why as above.
std::string ucxNetDevices(const std::vector<topo::IbPort>& ports, const Config& config,
                          const std::function<std::string(const std::string&)>& pciPathOf, std::string* why = nullptr);

/// A verbs device's PCI path as sysfs resolves /sys/class/infiniband/<device>/device; empty when
/// it does not.
std::string sysfsPciPath(const std::string& device);

}  // namespace coll::transport::net
