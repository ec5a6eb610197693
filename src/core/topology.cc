#include "core/topology.h"

#include <mutex>

#include "core/host_id.h"
#include "core/params.h"
#include "topo/detect.h"
#include "topo/topo_file.h"

namespace coll {

Result<topo::System> localSystem() {
  std::string file = params::kTopoFile.get();
  if (!file.empty()) {
    topo::System s;
    std::string error;
    if (!topo::loadSystemFile(file, &s, &error)) return Status(collInvalidArgument, "COLL_TOPO_FILE: " + error);
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

}  // namespace coll
