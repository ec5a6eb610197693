#include "topo/machine.h"

#include <hwloc.h>

#include <fmt/format.h>

namespace coll::topo {

MachineSummary summarizeMachine() {
  MachineSummary m;
  unsigned v = hwloc_get_api_version();
  m.hwlocVersion = fmt::format("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff);
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) {
    m.error = "hwloc_topology_init failed";
    return m;
  }
  if (hwloc_topology_load(t) != 0) {
    m.error = "hwloc_topology_load failed";
    hwloc_topology_destroy(t);
    return m;
  }
  m.packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  m.numaNodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  m.cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  m.pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  hwloc_obj_t root = hwloc_get_root_obj(t);
  m.memoryBytes = root ? root->total_memory : 0;
  hwloc_topology_destroy(t);
  return m;
}

}  // namespace coll::topo
