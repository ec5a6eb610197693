#include "topo/system.h"

namespace coll::topo {

int numaOf(const System& s, const PciPlace& p) {
  if (p.numa >= 0) return p.numa;
  return s.numa.empty() ? 0 : s.numa.front().id;
}

int packageOf(const System& s, int numa) {
  for (const NumaNode& n : s.numa)
    if (n.id == numa) return n.package;
  return 0;
}

}  // namespace coll::topo
