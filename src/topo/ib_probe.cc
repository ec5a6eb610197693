#include "topo/ib_probe.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

#ifdef COLL_HAVE_IB
#include <infiniband/verbs.h>
#endif

namespace coll::topo {

double ibRateGbps(int activeWidth, int activeSpeed) {
  // IBV_WIDTH_* and IBV_SPEED_* are single bits; the bit's position indexes these tables.
  static const int kLanes[] = {1, 4, 8, 12, 2};  // 1X, 4X, 8X, 12X, 2X
  // Gb/s per lane as the kernel reports the rate: SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR.
  static const double kLaneGbps[] = {2.5, 5, 10, 10, 14, 25, 50, 100};
  auto bit = [](int code, int count) {
    for (int i = 0; i < count; ++i)
      if (code == 1 << i) return i;
    return -1;
  };
  int w = bit(activeWidth, 5), s = bit(activeSpeed, 8);
  return w < 0 || s < 0 ? 0 : kLanes[w] * kLaneGbps[s];
}

std::string formatGid(const unsigned char raw[16]) {
  char out[40];
  int at = 0;
  for (int i = 0; i < 16; i += 2)
    at += std::snprintf(out + at, sizeof(out) - at, i ? ":%02x%02x" : "%02x%02x", raw[i], raw[i + 1]);
  return out;
}

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
    // ibv_query_port is a macro over the exported symbol of that name, which fills the fields of
    // ibv_port_attr read here (the ones every rdma-core version has); NCCL calls it the same way.
    using Open = ibv_context* (*)(ibv_device*);
    using Close = int (*)(ibv_context*);
    using QueryDevice = int (*)(ibv_context*, ibv_device_attr*);
    using QueryPort = int (*)(ibv_context*, uint8_t, ibv_port_attr*);
    using QueryGid = int (*)(ibv_context*, uint8_t, int, ibv_gid*);
    auto openDevice = reinterpret_cast<Open>(dlsym(h, "ibv_open_device"));
    auto closeDevice = reinterpret_cast<Close>(dlsym(h, "ibv_close_device"));
    auto queryDevice = reinterpret_cast<QueryDevice>(dlsym(h, "ibv_query_device"));
    auto queryPort = reinterpret_cast<QueryPort>(dlsym(h, "ibv_query_port"));
    auto queryGid = reinterpret_cast<QueryGid>(dlsym(h, "ibv_query_gid"));
    int n = 0;
    ibv_device** list = getList(&n);
    for (int i = 0; list && i < n; ++i) {
      info.devices.push_back(getName(list[i]));
      if (!openDevice || !closeDevice || !queryDevice || !queryPort) continue;
      ibv_context* ctx = openDevice(list[i]);
      if (!ctx) continue;
      ibv_device_attr dev{};
      if (queryDevice(ctx, &dev) == 0) {
        for (int p = 1; p <= dev.phys_port_cnt; ++p) {
          ibv_port_attr attr{};
          if (queryPort(ctx, static_cast<uint8_t>(p), &attr) != 0) continue;
          IbPort port;
          port.device = info.devices.back();
          port.port = p;
          port.active = attr.state == IBV_PORT_ACTIVE;
          port.linkLayer = attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
          port.gbps = ibRateGbps(attr.active_width, attr.active_speed);
          ibv_gid gid{};
          if (queryGid && queryGid(ctx, static_cast<uint8_t>(p), 0, &gid) == 0) port.gid = formatGid(gid.raw);
          info.ports.push_back(port);
        }
      }
      closeDevice(ctx);
    }
    if (list) freeList(list);
    if (info.devices.empty()) info.why = "no verbs devices";
#endif
  });
  return info;
}

}  // namespace coll::topo
