// InfiniBand/RoCE device discovery through libibverbs loaded at run time (dlopen), so that libcoll
// loads on machines without rdma-core: devices and their ports (state, link layer, rate, GID).
// The IB transport comes later.
#pragma once

#include <string>
#include <vector>

namespace coll::topo {

struct IbPort {
  std::string device;  // "mlx5_0"
  int port = 1;
  bool active = false;
  std::string linkLayer;  // "InfiniBand" or "Ethernet" (RoCE)
  double gbps = 0;        // signalling rate, lanes x lane speed, as sysfs's "rate" says it
  std::string gid;        // GID index 0, sysfs's spelling ("fe80:0000:...")
};

struct IbInfo {
  bool compiled = false;       // built with COLL_ENABLE_IB (verbs headers available)
  bool libraryLoaded = false;  // libibverbs.so.1 found at run time
  std::vector<std::string> devices;
  std::vector<IbPort> ports;  // every port of every device that could be opened
  std::string why;            // when no device is listed
};

/// Lists verbs devices and ports once per process. Thread-safe; fails soft.
const IbInfo& ibInfo();

/// Gb/s of a port from ibv_port_attr's active_width and active_speed codes; 0 if unknown.
double ibRateGbps(int activeWidth, int activeSpeed);

/// A GID's 16 bytes as sysfs writes them: eight groups of four hex digits.
std::string formatGid(const unsigned char raw[16]);

}  // namespace coll::topo
