// Loading an NCCL network plugin and calling it through one interface (plugin_net.h). One
// adapter template per ABI generation translates the newest call shape to the plugin's table.
#include "transport/net/plugin/plugin_net.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

#include "base/log.h"
#include "base/params.h"
#include "transport/net/plugin/nccl_net_abi.h"

namespace coll::transport::net::plugin {
namespace {

// The plugins' logger: their lines go to coll's log (NET subsystem) at the matching level.
void pluginLog(int level, unsigned long /*flags*/, const char* file, int line, const char* fmt, ...) {
  log::Level ours = level == 2 || level == 4 ? log::Level::WARN : level == 5 ? log::Level::TRACE : log::Level::INFO;
  if (level <= 1 || !log::enabled(ours, log::NET)) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  const char* base = file ? std::strrchr(file, '/') : nullptr;
  log::write(ours, log::NET, FMT_STRING("net plugin: {} ({}:{})"), text, base ? base + 1 : (file ? file : "?"), line);
}

// Properties of any version, read into the common form. Fields a version lacks keep their
// defaults (v6: no netDeviceType, v6/v7: no regIsGlobal, v6-v8: no maxP2pBytes, no forceFlush).
template <typename P>
Device deviceFrom(int index, const P& p) {
  constexpr bool kV6 = std::is_same_v<P, abi::PropertiesV6>;
  constexpr bool kV7 = std::is_same_v<P, abi::PropertiesV7>;
  Device d;
  d.index = index;
  d.name = p.name ? p.name : "";
  d.pciPath = p.pciPath ? p.pciPath : "";
  d.guid = p.guid;
  d.ptrSupport = p.ptrSupport;
  if constexpr (!kV6 && !kV7) d.regIsGlobal = p.regIsGlobal != 0;
  d.speedMbps = p.speed;
  d.port = p.port;
  d.latencyUs = p.latency;
  d.maxComms = p.maxComms;
  d.maxRecvs = p.maxRecvs;
  if constexpr (!kV6) d.netDeviceType = p.netDeviceType;
  if constexpr (!kV6 && !kV7 && !std::is_same_v<P, abi::PropertiesV8>) {
    d.forceFlush = p.forceFlush != 0;
    d.maxP2pBytes = p.maxP2pBytes;
  }
  return d;
}

template <typename Table, typename Props, int kVersion>
class Adapter final : public Net {
 public:
  explicit Adapter(const Table* t) : t_(t) { version_ = kVersion; }
  using Net::devices_;  // filled by the loader below
  using Net::name_;
  using Net::path_;

  // Process-wide init of v6..v10 (v11+ initialises per communicator in initComm).
  int initProcess() {
    if constexpr (kVersion >= 11) {
      return abi::kSuccess;
    } else if constexpr (kVersion == 10) {
      return t_->init(&pluginLog, nullptr);
    } else {
      return t_->init(&pluginLog);
    }
  }
  int ndevices(int* n) { return t_->devices(n); }
  int properties(int dev, Device* out) {
    Props p{};
    int r = t_->getProperties(dev, &p);
    if (r == abi::kSuccess) *out = deviceFrom(dev, p);
    return r;
  }

  int initComm(uint64_t commId, int trafficClass, void** ctx) override {
    *ctx = nullptr;
    if constexpr (kVersion >= 11) {
      abi::CommConfig config{trafficClass};
      return t_->init(ctx, commId, &config, &pluginLog, nullptr);
    } else {
      (void)commId, (void)trafficClass;
      return abi::kSuccess;
    }
  }
  int finalize(void* ctx) override {
    if constexpr (kVersion >= 11) {
      return t_->finalize ? t_->finalize(ctx) : abi::kSuccess;
    } else {
      (void)ctx;
      return abi::kSuccess;
    }
  }
  int listen(void* ctx, int dev, void* handle, void** listenComm) override {
    if constexpr (kVersion >= 11) {
      return t_->listen(ctx, dev, handle, listenComm);
    } else {
      (void)ctx;
      return t_->listen(dev, handle, listenComm);
    }
  }
  int connect(void* ctx, int dev, int trafficClass, void* handle, void** sendComm) override {
    abi::DeviceHandle* devHandle = nullptr;  // host networks leave it null
    if constexpr (kVersion >= 11) {
      (void)trafficClass;  // given to init
      return t_->connect(ctx, dev, handle, sendComm, &devHandle);
    } else if constexpr (kVersion == 10) {
      (void)ctx;
      abi::CommConfig config{trafficClass};  // plugins dereference it: never null
      return t_->connect(dev, &config, handle, sendComm, &devHandle);
    } else if constexpr (kVersion >= 7) {
      (void)ctx, (void)trafficClass;
      return t_->connect(dev, handle, sendComm, &devHandle);
    } else {
      (void)ctx, (void)trafficClass, (void)devHandle;
      return t_->connect(dev, handle, sendComm);
    }
  }
  int accept(void* listenComm, void** recvComm) override {
    if constexpr (kVersion >= 7) {
      abi::DeviceHandle* devHandle = nullptr;
      return t_->accept(listenComm, recvComm, &devHandle);
    } else {
      return t_->accept(listenComm, recvComm);
    }
  }
  int regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    if constexpr (kVersion >= 8) {
      return t_->regMr(comm, data, size, type, mhandle);
    } else {  // v6, v7: an int size
      if (size > static_cast<size_t>(std::numeric_limits<int>::max())) return abi::kInvalidArgument;
      return t_->regMr(comm, data, static_cast<int>(size), type, mhandle);
    }
  }
  int deregMr(void* comm, void* mhandle) override { return t_->deregMr(comm, mhandle); }
  int isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    if constexpr (kVersion >= 10) {
      return t_->isend(sendComm, data, size, tag, mhandle, nullptr, request);
    } else if constexpr (kVersion == 9) {
      return t_->isend(sendComm, data, size, tag, mhandle, request);
    } else {
      if (size > static_cast<size_t>(std::numeric_limits<int>::max())) return abi::kInvalidArgument;
      return t_->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request);
    }
  }
  int irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) override {
    void* datas[1] = {data};
    int tags[1] = {tag};
    void* mhandles[1] = {mhandle};
    if constexpr (kVersion >= 9) {
      size_t sizes[1] = {size};
      if constexpr (kVersion >= 10) {
        void* phandles[1] = {nullptr};
        return t_->irecv(recvComm, 1, datas, sizes, tags, mhandles, phandles, request);
      } else {
        return t_->irecv(recvComm, 1, datas, sizes, tags, mhandles, request);
      }
    } else {
      if (size > static_cast<size_t>(std::numeric_limits<int>::max())) return abi::kInvalidArgument;
      int sizes[1] = {static_cast<int>(size)};
      return t_->irecv(recvComm, 1, datas, sizes, tags, mhandles, request);
    }
  }
  int iflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) override {
    *request = nullptr;
    if (!t_->iflush) return abi::kSuccess;
    void* datas[1] = {data};
    int sizes[1] = {static_cast<int>(std::min<size_t>(size, std::numeric_limits<int>::max()))};
    void* mhandles[1] = {mhandle};
    return t_->iflush(recvComm, 1, datas, sizes, mhandles, request);
  }
  int test(void* request, int* done, size_t* size) override {
    int sizes[1] = {0};  // every version reports int sizes
    int r = t_->test(request, done, sizes);
    if (size) *size = static_cast<size_t>(sizes[0] < 0 ? 0 : sizes[0]);
    return r;
  }
  int irecvConsumed(void* recvComm, void* request) override {
    if constexpr (kVersion >= 7) {
      return t_->irecvConsumed ? t_->irecvConsumed(recvComm, 1, request) : abi::kSuccess;
    } else {
      (void)recvComm, (void)request;
      return abi::kSuccess;  // v6 has no such call
    }
  }
  int closeSend(void* c) override { return t_->closeSend(c); }
  int closeRecv(void* c) override { return t_->closeRecv(c); }
  int closeListen(void* c) override { return t_->closeListen(c); }

  const Table* t_;
};

// Same NIC: same name, PCI path and port. GUIDs do not tell: aws-ofi-nccl over libfabric's tcp
// provider lists one interface four times with four GUIDs and the same name and (null) path,
// while two ports of one HCA share a GUID and differ by port.
bool sameNic(const Device& a, const Device& b) {
  return a.name == b.name && a.pciPath == b.pciPath && a.port == b.port;
}

// Reads devices and properties through an adapter, keeps usable unique ones.
template <typename A>
Status probeDevices(A* a, const std::string& who) {
  int n = 0;
  int r = a->ndevices(&n);
  if (r != abi::kSuccess)
    return COLL_ERROR(collSystemError, FMT_STRING("{}: devices() failed with {}"), who, resultName(r));
  std::vector<Device> out;
  for (int dev = 0; dev < n; ++dev) {
    Device d;
    r = a->properties(dev, &d);
    if (r != abi::kSuccess)
      return COLL_ERROR(collSystemError, FMT_STRING("{}: getProperties({}) failed with {}"), who, dev, resultName(r));
    if (!(d.ptrSupport & abi::kPtrHost)) {
      COLL_LOG(INFO, NET, "{}: device {} ({}) cannot send host memory; skipped", who, dev, d.name);
      continue;
    }
    if (d.netDeviceType != 0) {
      COLL_LOG(INFO, NET, "{}: device {} ({}) is a device-offload network (type {}); skipped", who, dev, d.name,
               d.netDeviceType);
      continue;
    }
    bool dup = false;
    for (const Device& e : out) dup = dup || sameNic(e, d);
    if (dup) {
      COLL_LOG(INFO, NET, "{}: device {} ({}) is the same NIC as an earlier one; skipped", who, dev, d.name);
      continue;
    }
    out.push_back(std::move(d));
  }
  if (out.empty())
    return COLL_ERROR(collSystemError, FMT_STRING("{}: no usable device ({} listed; coll needs host-memory support)"),
                      who, n);
  a->devices_ = std::move(out);
  return Status::ok();
}

// Finds the newest ncclNetPlugin_vN in lib and builds its adapter; initialises v6..v10 once and
// probes the devices (v11+ through a probe context, finalized again).
template <typename Table, typename Props, int kVersion>
Result<Net*> tryVersion(void* lib, const std::string& path, bool* found) {
  std::string symbol = "ncclNetPlugin_v" + std::to_string(kVersion);
  auto* t = static_cast<const Table*>(dlsym(lib, symbol.c_str()));
  *found = t != nullptr;
  if (!t) return static_cast<Net*>(nullptr);
  auto a = std::make_unique<Adapter<Table, Props, kVersion>>(t);
  a->name_ = t->name ? t->name : "?";
  a->path_ = path;
  std::string who = fmt::format("net plugin '{}' ({} v{})", a->name_, path, kVersion);
  int r = a->initProcess();
  if (r != abi::kSuccess) return COLL_ERROR(collSystemError, FMT_STRING("{}: init failed with {}"), who, resultName(r));
  void* probe = nullptr;
  if (kVersion >= 11) {
    r = a->initComm(0, abi::kTrafficClassUndef, &probe);
    if (r != abi::kSuccess)
      return COLL_ERROR(collSystemError, FMT_STRING("{}: init failed with {}"), who, resultName(r));
  }
  Status s = probeDevices(a.get(), who);
  if (kVersion >= 11) (void)a->finalize(probe);
  COLL_TRY(s);
  COLL_LOG(INFO, NET, "{}: loaded, {} device(s)", who, a->devices_.size());
  return static_cast<Net*>(a.release());  // lives as long as the process, like the library
}

}  // namespace

const char* resultName(int result) {
  switch (result) {
    case abi::kSuccess:
      return "ncclSuccess";
    case abi::kUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case abi::kSystemError:
      return "ncclSystemError";
    case abi::kInternalError:
      return "ncclInternalError";
    case abi::kInvalidArgument:
      return "ncclInvalidArgument";
    case abi::kInvalidUsage:
      return "ncclInvalidUsage";
    case abi::kRemoteError:
      return "ncclRemoteError";
    case abi::kInProgress:
      return "ncclInProgress";
    default:
      return "an unknown ncclResult_t";
  }
}

std::string pluginRequest() {
  std::string v = params::kNetPlugin.get();
  if (v == "none") return "";
  return v.empty() ? "libnccl-net.so" : v;
}

namespace {
Result<Net*> loadFrom(const std::string& request, bool explicitRequest) {
  // A bare name X means libnccl-net-X.so, as NCCL_NET_PLUGIN; a path or a file name is used as is.
  std::vector<std::string> candidates;
  if (explicitRequest && request.find('/') == std::string::npos && request.find(".so") == std::string::npos)
    candidates.push_back("libnccl-net-" + request + ".so");
  candidates.push_back(request);
  std::string errors;
  void* lib = nullptr;
  std::string path;
  for (const std::string& c : candidates) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      path = c;
      break;
    }
    const char* e = dlerror();
    errors += fmt::format("{}{}", errors.empty() ? "" : "; ", e ? e : c + ": not found");
  }
  if (!lib) {
    if (!explicitRequest) {
      COLL_LOG(INFO, NET, "no net plugin ({}); coll's own networks are used", errors);
      return static_cast<Net*>(nullptr);
    }
    return COLL_ERROR(collSystemError, FMT_STRING("COLL_NET_PLUGIN={}: cannot load it ({})"), request, errors);
  }
  bool found = false;
  Result<Net*> net = tryVersion<abi::NetV12, abi::PropertiesV12, 12>(lib, path, &found);
  if (!found) net = tryVersion<abi::NetV11, abi::PropertiesV11, 11>(lib, path, &found);
  if (!found) net = tryVersion<abi::NetV10, abi::PropertiesV10, 10>(lib, path, &found);
  if (!found) net = tryVersion<abi::NetV9, abi::PropertiesV9, 9>(lib, path, &found);
  if (!found) net = tryVersion<abi::NetV8, abi::PropertiesV8, 8>(lib, path, &found);
  if (!found) net = tryVersion<abi::NetV7, abi::PropertiesV7, 7>(lib, path, &found);
  if (!found) net = tryVersion<abi::NetV6, abi::PropertiesV6, 6>(lib, path, &found);
  if (!found)
    net = COLL_ERROR(collSystemError,
                     FMT_STRING("COLL_NET_PLUGIN={}: {} exports none of ncclNetPlugin_v12, v11, v10, v9, v8, v7, v6 "
                                "(coll loads those versions)"),
                     request, path);
  if (!net.isOk() && !explicitRequest) {
    COLL_LOG(WARN, NET, "{}; coll's own networks are used", net.status().message());
    return static_cast<Net*>(nullptr);
  }
  return net;  // the library stays loaded: a plugin's threads may outlive any communicator
}
}  // namespace

Result<Net*> loadedPlugin() {
  static std::once_flag once;
  static Result<Net*> loaded = static_cast<Net*>(nullptr);
  std::call_once(once, [] {
    std::string request = pluginRequest();
    if (request.empty()) return;
    loaded = loadFrom(request, params::kNetPlugin.isSet());
  });
  return loaded;
}

}  // namespace coll::transport::net::plugin
