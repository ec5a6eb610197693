#include "topo/host_system.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "base/host_id.h"
#include "base/params.h"
#include "topo/detect.h"
#include "topo/paths.h"
#include "topo/topo_file.h"

namespace coll {

Result<topo::System> localSystem() {
  std::string file = params::kTopoFile.get();
  if (!file.empty()) {
    topo::System s;
    std::string error;
    if (!topo::loadSystemFile(file, &s, &error)) return Status(collInvalidArgument, "COLL_TOPO_FILE: " + error);
    if (s.host.empty()) s.host = hostName();  // NCCL's XML names no host
    if (s.hostId.empty()) s.hostId = hostIdentity();
    return s;
  }
  // Detection loads the whole PCI tree (tens of ms): once per process.
  static std::once_flag once;
  static topo::System detected;
  std::call_once(once, [] { detected = topo::detectSystem(hostName(), hostIdentity()); });
  return detected;
}

Status dumpSystemIfAsked(const topo::System& s) {
  std::string file = params::kTopoDumpFile.get();
  if (file.empty()) return Status::ok();
  std::string error;
  if (!topo::saveSystemFile(file, s, &error)) return Status(collSystemError, "COLL_TOPO_DUMP_FILE: " + error);
  return Status::ok();
}

std::string socketInterfaceByLocality(const topo::System& s, int numa, const std::vector<net::Interface>& up) {
  // Only the System's NICs that sockets can use: those whose interface is up with an address.
  topo::System usable = s;
  usable.nics.clear();
  for (const auto& nic : s.nics)
    if (!nic.netdev.empty() &&
        std::any_of(up.begin(), up.end(), [&](const net::Interface& i) { return i.name == nic.netdev; }))
      usable.nics.push_back(nic);
  if (usable.nics.empty()) return "";
  if (numa < 0) numa = usable.numa.empty() ? 0 : usable.numa[0].id;
  int pick = topo::assignNics(usable, {topo::Endpoint{topo::Endpoint::kNuma, numa}})[0];
  return pick >= 0 ? usable.nics[pick].netdev : "";
}

Result<net::Interface> socketInterface(int numa, bool* byLocality) {
  *byLocality = false;
  std::string preferred;
  if (!params::kSocketIfname.isSet()) {
    // The topology costs tens of ms to load: only when there is a choice between physical ports.
    std::set<std::string> physical;
    for (const auto& i : net::listInterfaces())
      if (net::isPhysical(i.name)) physical.insert(i.name);
    if (physical.size() >= 2 || !params::kTopoFile.get().empty()) {
      COLL_ASSIGN_OR_RETURN(topo::System sys, localSystem());
      preferred = socketInterfaceByLocality(sys, numa, net::listInterfaces());
    }
  }
  COLL_ASSIGN_OR_RETURN(net::Interface iface, net::selectInterfaceFromEnv(preferred));
  *byLocality = !preferred.empty() && iface.name == preferred;
  return iface;
}

}  // namespace coll
