// Network interface discovery and COLL_SOCKET_IFNAME selection (NCCL's syntax).
//
// Selection is a pure function over a list of interfaces so that every rule can be unit-tested
// with made-up machines; listInterfaces() reads the real one (getifaddrs).
#pragma once

#include <string>
#include <vector>

#include "base/socket.h"
#include "base/status.h"

namespace coll::net {

struct Interface {
  std::string name;
  Address address;
  bool up = false;
  bool loopback = false;
};

/// A parsed COLL_SOCKET_IFNAME: "eth,ib" (prefixes), "^docker" (exclude), "=eth0" (exact).
struct IfnameFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;

  static IfnameFilter parse(const std::string& spec);
  bool matches(const std::string& ifname) const;
};

/// Up interfaces with an IPv4 or a routable IPv6 address, one entry per address, in kernel order.
std::vector<Interface> listInterfaces();

/// Chooses the interface for bootstrap and TCP traffic.
/// spec empty: the interface named preferred if it is up, else the first up non-loopback
/// interface not named docker*, else loopback.
/// family: "" (IPv4 preferred), "AF_INET" or "AF_INET6".
Result<Interface> selectInterface(const std::vector<Interface>& interfaces, const std::string& spec,
                                  const std::string& family, const std::string& preferred = "");

/// Whether a network interface has a device behind it (veth, bridges, docker and loopback do not).
bool isPhysical(const std::string& name);

/// The link speed sysfs reports for a physical interface in Mb/s; 0 when it reports none or the
/// interface is virtual (veth, bridge, loopback: their speeds are nominal).
int linkSpeedMbps(const std::string& name);

/// selectInterface over the machine's interfaces with COLL_SOCKET_IFNAME / COLL_SOCKET_FAMILY.
Result<Interface> selectInterfaceFromEnv(const std::string& preferred = "");

}  // namespace coll::net
