// A loaded NCCL network plugin (libnccl-net-*.so), whatever its ABI version (v6..v12), seen
// through one interface in the newest version's shape: plugin_provider.cc turns it into a coll
// network provider (net.h). Loading follows NCCL_NET_PLUGIN's rules (COLL_NET_PLUGIN):
//   unset      try libnccl-net.so; when it is absent or fails, coll quietly uses its sockets
//   "none"     no plugin
//   X          libnccl-net-X.so, then X itself (a path or a file name on the loader's path);
//              a failure is an error at communicator init, not a silent fallback
// The symbols ncclNetPlugin_v12 down to ncclNetPlugin_v6 are tried newest first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace coll::transport::net::plugin {

/// One NIC as the plugin describes it (ncclNetProperties), after de-duplication.
struct Device {
  int index = 0;  // the plugin's device number
  std::string name, pciPath;
  uint64_t guid = 0;
  int ptrSupport = 0;  // abi::kPtrHost | kPtrCuda | kPtrDmaBuf
  bool regIsGlobal = false;
  bool forceFlush = false;
  int speedMbps = 0;
  int port = 0;
  float latencyUs = 0;
  int maxComms = 0;
  int maxRecvs = 1;
  size_t maxP2pBytes = 0;  // 0: unlimited below 2 GiB (v6-v8 have no such field)
  int netDeviceType = 0;
};

/// The plugin's calls, version differences hidden. Every call returns the plugin's ncclResult_t
/// (abi::Result); the provider turns non-zero into a Status naming the plugin, call and peer.
class Net {
 public:
  virtual ~Net() = default;
  const std::string& name() const { return name_; }  // what the plugin calls itself ("IB", "AWS Libfabric")
  const std::string& path() const { return path_; }  // the file dlopen loaded
  int version() const { return version_; }           // the ABI version found, 8..12
  /// Usable devices (host memory supported), de-duplicated; never empty once loaded.
  const std::vector<Device>& devices() const { return devices_; }

  /// Per communicator: v11+ init(ctx, commId, config); earlier versions have one process-wide
  /// init, done at load, and *ctx is null. finalize(ctx) is a no-op before v11.
  virtual int initComm(uint64_t commId, int trafficClass, void** ctx) = 0;
  virtual int finalize(void* ctx) = 0;
  virtual int listen(void* ctx, int dev, void* handle, void** listenComm) = 0;
  /// Non-blocking: *sendComm stays null until the connection is up. trafficClass reaches v10's
  /// per-connection config (plugins such as aws-ofi-nccl dereference it, so it is never null).
  virtual int connect(void* ctx, int dev, int trafficClass, void* handle, void** sendComm) = 0;
  virtual int accept(void* listenComm, void** recvComm) = 0;
  virtual int regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual int deregMr(void* comm, void* mhandle) = 0;
  virtual int isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  /// One receive (n = 1) of at most size bytes.
  virtual int irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle, void** request) = 0;
  /// Makes a completed receive into device memory visible to the GPU; *request null when
  /// nothing is needed.
  virtual int iflush(void* recvComm, void* data, size_t size, void* mhandle, void** request) = 0;
  virtual int test(void* request, int* done, size_t* size) = 0;
  /// After a completed receive's buffer has been consumed (NCCL calls it then too); optional.
  virtual int irecvConsumed(void* recvComm, void* request) = 0;
  virtual int closeSend(void* sendComm) = 0;
  virtual int closeRecv(void* recvComm) = 0;
  virtual int closeListen(void* listenComm) = 0;

 protected:
  std::string name_, path_;
  int version_ = 0;
  std::vector<Device> devices_;
};

/// The process's plugin as COLL_NET_PLUGIN asks, loaded once (later calls return the first
/// answer): nullptr when none is asked for or the default libnccl-net.so is absent or unusable
/// (coll then uses its sockets); an error when the plugin the user named cannot be used, naming
/// the plugin, the versions tried and dlerror's or the plugin's reason.
Result<Net*> loadedPlugin();

/// What COLL_NET_PLUGIN resolves to, for messages ("libnccl-net-X.so", or "" for none).
std::string pluginRequest();

/// A plugin result code's name ("ncclSystemError").
const char* resultName(int result);

}  // namespace coll::transport::net::plugin
