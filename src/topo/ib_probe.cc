#include "topo/ib_probe.h"

#include <dlfcn.h>

#include <mutex>

#ifdef COLL_HAVE_IB
#include <infiniband/verbs.h>
#endif

namespace coll::topo {

const IbInfo& ibInfo() {
  static IbInfo info;
  static std::once_flag once;
  std::call_once(once, [] {
#ifndef COLL_HAVE_IB
    info.why = "built without InfiniBand support (COLL_ENABLE_IB=OFF or libibverbs-dev missing)";
#else
    info.compiled = true;
    void* h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      info.why = "libibverbs.so.1 not found";
      return;
    }
    info.libraryLoaded = true;
    using GetList = ibv_device** (*)(int*);
    using FreeList = void (*)(ibv_device**);
    using GetName = const char* (*)(ibv_device*);
    auto getList = reinterpret_cast<GetList>(dlsym(h, "ibv_get_device_list"));
    auto freeList = reinterpret_cast<FreeList>(dlsym(h, "ibv_free_device_list"));
    auto getName = reinterpret_cast<GetName>(dlsym(h, "ibv_get_device_name"));
    if (!getList || !freeList || !getName) {
      info.why = "libibverbs.so.1 lacks expected symbols";
      return;
    }
    int n = 0;
    ibv_device** list = getList(&n);
    for (int i = 0; list && i < n; ++i) info.devices.push_back(getName(list[i]));
    if (list) freeList(list);
    if (info.devices.empty()) info.why = "no verbs devices";
#endif
  });
  return info;
}

}  // namespace coll::topo
