#include "topo/nvml_probe.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdio>
#include <mutex>

namespace coll::topo {
namespace {

// The few NVML declarations used (nvml.h is not part of every CUDA toolkit): the ABI of
// NVML's documented C interface.
using nvmlReturn = int;  // NVML_SUCCESS = 0
using nvmlDevice = struct nvmlDeviceOpaque*;
struct nvmlPciInfo {  // nvmlPciInfo_t as filled by the _v2 calls
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
constexpr unsigned kMaxLinks = 18;     // NVML_NVLINK_MAX_LINKS since Hopper
constexpr unsigned kRemoteGpu = 0;     // NVML_NVLINK_DEVICE_TYPE_GPU
constexpr unsigned kRemoteSwitch = 2;  // NVML_NVLINK_DEVICE_TYPE_SWITCH

struct Nvml {
  bool ok = false;
  std::string why;
  nvmlReturn (*handleByBusId)(const char*, nvmlDevice*) = nullptr;
  nvmlReturn (*linkState)(nvmlDevice, unsigned, int*) = nullptr;
  nvmlReturn (*linkVersion)(nvmlDevice, unsigned, unsigned*) = nullptr;
  nvmlReturn (*remotePci)(nvmlDevice, unsigned, nvmlPciInfo*) = nullptr;
  nvmlReturn (*remoteType)(nvmlDevice, unsigned, unsigned*) = nullptr;
};

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      n.why = "libnvidia-ml.so.1 not found (no NVIDIA driver)";
      return;
    }
    auto init = reinterpret_cast<nvmlReturn (*)()>(dlsym(h, "nvmlInit_v2"));
    n.handleByBusId = reinterpret_cast<decltype(n.handleByBusId)>(dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.linkState = reinterpret_cast<decltype(n.linkState)>(dlsym(h, "nvmlDeviceGetNvLinkState"));
    n.linkVersion = reinterpret_cast<decltype(n.linkVersion)>(dlsym(h, "nvmlDeviceGetNvLinkVersion"));
    n.remotePci = reinterpret_cast<decltype(n.remotePci)>(dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2"));
    n.remoteType = reinterpret_cast<decltype(n.remoteType)>(dlsym(h, "nvmlDeviceGetNvLinkRemoteDeviceType"));
    if (!init || !n.handleByBusId || !n.linkState || !n.remotePci) {
      n.why = "libnvidia-ml.so.1 lacks the NVLink queries";
      return;
    }
    if (int rc = init()) {
      n.why = "nvmlInit failed (" + std::to_string(rc) + ")";
      return;
    }
    n.ok = true;
  });
  return n;
}

}  // namespace

std::string normalizeBusId(const std::string& busId) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(busId.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) return busId;
  char out[32];
  std::snprintf(out, sizeof(out), "%04x:%02x:%02x.%x", domain, bus, dev, fn);
  return out;
}

bool nvlinksOf(const std::string& busId, NvLinks* out, std::string* why) {
  const Nvml& n = nvml();
  if (!n.ok) return *why = n.why, false;
  nvmlDevice dev = nullptr;
  if (int rc = n.handleByBusId(busId.c_str(), &dev))
    return *why = "NVML does not know GPU " + busId + " (" + std::to_string(rc) + ")", false;
  *out = NvLinks{};
  for (unsigned link = 0; link < kMaxLinks; ++link) {
    int active = 0;
    if (n.linkState(dev, link, &active) != 0 || !active) continue;  // past the GPU's last link, or down
    unsigned version = 0;
    if (n.linkVersion && n.linkVersion(dev, link, &version) == 0)
      out->GBsPerLink = version >= 2 ? 25 : 20;  // per direction: NVLink 2-4 25 GB/s, NVLink 1 20 GB/s
    unsigned type = kRemoteGpu;
    if (n.remoteType && n.remoteType(dev, link, &type) != 0) type = kRemoteGpu;
    if (type == kRemoteSwitch) {
      ++out->switchLinks;
      continue;
    }
    nvmlPciInfo pci{};
    if (type != kRemoteGpu || n.remotePci(dev, link, &pci) != 0) continue;  // a CPU (IBM NPU) or unknown
    std::string peer = normalizeBusId(pci.busId);
    bool found = false;
    for (auto& p : out->gpuPeers)
      if (p.first == peer) ++p.second, found = true;
    if (!found) out->gpuPeers.push_back({peer, 1});
  }
  if (out->switchLinks == 0 && out->gpuPeers.empty()) return *why = "GPU " + busId + " has no active NVLink", false;
  return true;
}

}  // namespace coll::topo
