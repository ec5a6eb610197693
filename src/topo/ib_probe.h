// InfiniBand/RoCE device discovery through libibverbs loaded at run time (dlopen), so that libcoll
// loads on machines without rdma-core. Reports devices only; the IB transport comes later.
#pragma once

#include <string>
#include <vector>

namespace coll::topo {

struct IbInfo {
  bool compiled = false;       // built with COLL_ENABLE_IB (verbs headers available)
  bool libraryLoaded = false;  // libibverbs.so.1 found at run time
  std::vector<std::string> devices;
  std::string why;  // when no device is listed
};

/// Lists verbs devices once per process. Thread-safe; fails soft.
const IbInfo& ibInfo();

}  // namespace coll::topo
