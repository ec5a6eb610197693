// The binary interface of NCCL network plugins, versions 6 to 12, as coll reads it: the layouts
// of the function tables a plugin exports as ncclNetPlugin_vN and of the structures they pass.
// Written from the facts of NCCL's published net-plugin headers (ext-net): field order, types
// and signatures must match them exactly, since plugins are built against those headers. Only
// the point-to-point table is declared; coll does not load collective-network (CollNet) tables.
//
// What changed between versions (the reason for seven tables):
//   v6   connect and accept take no device-offload handle; properties have no regIsGlobal and no
//        netDeviceType/Version; regMr takes an int size; no getDeviceMr, no irecvConsumed.
//   v7   connect and accept gain the device-offload out-parameter; properties gain
//        netDeviceType and netDeviceVersion; getDeviceMr and irecvConsumed appear.
//   v8   properties gain regIsGlobal; regMr takes a size_t size. isend/irecv sizes are int; test
//        reports int sizes.
//   v9   sizes become size_t; properties gain forceFlush, vProps (4 devices), maxP2pBytes and
//        maxCollBytes; makeVDevice appears.
//   v10  connect takes a per-connection config (traffic class); isend/irecv take a profiler
//        handle; init takes a profiler callback.
//   v11  init returns a per-communicator context (commId, config), which listen and connect take;
//        finalize(ctx) and setNetAttr(ctx, attr) appear; properties gain maxMultiRequestSize.
//   v12  vProps hold 8 devices; properties gain railId and planeId.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coll::transport::net::abi {

// ncclResult_t values plugins return.
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};
using ResultT = int;  // the enum's C representation

constexpr int kPtrHost = 0x1;
constexpr int kPtrCuda = 0x2;
constexpr int kPtrDmaBuf = 0x4;
constexpr size_t kHandleMaxBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE
constexpr int kTrafficClassUndef = -1;   // NCCL_NET_TRAFFIC_CLASS_UNDEF

// The logger plugins call: (level, subsystem flags, file, line, printf format, ...). Levels:
// 0 none, 1 version, 2 warn, 3 info, 4 abort, 5 trace.
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
// The profiler callback (v10+): coll passes none.
using ProfilerCallback = ResultT (*)(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData);

// Device-offload handle (ncclNetDeviceHandle); coll only runs host-side networks
// (netDeviceType 0) and passes a pointer the plugin may leave null.
struct DeviceHandle {
  int netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};

struct CommConfig {  // ncclNetCommConfig_v10..v12
  int trafficClass;
};

struct PropertiesV6 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;  // Mbps
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;
};

struct PropertiesV7 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;  // Mbps
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
};

struct PropertiesV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;  // Mbps
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
};

template <int kDevs>
struct VDeviceProps {
  int ndevs;
  int devs[kDevs];
};

// v9 and v10 share one layout; v11 appends maxMultiRequestSize; v12 doubles vProps and appends
// railId and planeId.
struct PropertiesV9 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VDeviceProps<4> vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
};
using PropertiesV10 = PropertiesV9;

struct PropertiesV11 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VDeviceProps<4> vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};

struct PropertiesV12 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VDeviceProps<8> vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
};

// setNetAttr's argument (v11+): hints about the traffic to come; coll never calls setNetAttr.
struct NetCommAttr {
  int32_t maxConcurrentPeers, minConcurrentPeers, maxFlowsPerPeer, minFlowsPerPeer;
};
struct NetAttr {
  NetCommAttr sendCommAttr, recvCommAttr;
  uint32_t op, algo, proto;
};

struct NetV6 {
  const char* name;
  ResultT (*init)(Logger logFunction);
  ResultT (*devices)(int* ndev);
  ResultT (*getProperties)(int dev, PropertiesV6* props);
  ResultT (*listen)(int dev, void* handle, void** listenComm);
  ResultT (*connect)(int dev, void* handle, void** sendComm);
  ResultT (*accept)(void* listenComm, void** recvComm);
  ResultT (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ResultT (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ResultT (*deregMr)(void* comm, void* mhandle);
  ResultT (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ResultT (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ResultT (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ResultT (*test)(void* request, int* done, int* sizes);
  ResultT (*closeSend)(void* sendComm);
  ResultT (*closeRecv)(void* recvComm);
  ResultT (*closeListen)(void* listenComm);
};

struct NetV7 {
  const char* name;
  ResultT (*init)(Logger logFunction);
  ResultT (*devices)(int* ndev);
  ResultT (*getProperties)(int dev, PropertiesV7* props);
  ResultT (*listen)(int dev, void* handle, void** listenComm);
  ResultT (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ResultT (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ResultT (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ResultT (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ResultT (*deregMr)(void* comm, void* mhandle);
  ResultT (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ResultT (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ResultT (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ResultT (*test)(void* request, int* done, int* sizes);
  ResultT (*closeSend)(void* sendComm);
  ResultT (*closeRecv)(void* recvComm);
  ResultT (*closeListen)(void* listenComm);
  ResultT (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ResultT (*irecvConsumed)(void* recvComm, int n, void* request);
};

struct NetV8 {
  const char* name;
  ResultT (*init)(Logger logFunction);
  ResultT (*devices)(int* ndev);
  ResultT (*getProperties)(int dev, PropertiesV8* props);
  ResultT (*listen)(int dev, void* handle, void** listenComm);
  ResultT (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ResultT (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ResultT (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ResultT (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ResultT (*deregMr)(void* comm, void* mhandle);
  ResultT (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ResultT (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ResultT (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ResultT (*test)(void* request, int* done, int* sizes);
  ResultT (*closeSend)(void* sendComm);
  ResultT (*closeRecv)(void* recvComm);
  ResultT (*closeListen)(void* listenComm);
  ResultT (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ResultT (*irecvConsumed)(void* recvComm, int n, void* request);
};

struct NetV9 {
  const char* name;
  ResultT (*init)(Logger logFunction);
  ResultT (*devices)(int* ndev);
  ResultT (*getProperties)(int dev, PropertiesV9* props);
  ResultT (*listen)(int dev, void* handle, void** listenComm);
  ResultT (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ResultT (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ResultT (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ResultT (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ResultT (*deregMr)(void* comm, void* mhandle);
  ResultT (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ResultT (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  ResultT (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ResultT (*test)(void* request, int* done, int* sizes);
  ResultT (*closeSend)(void* sendComm);
  ResultT (*closeRecv)(void* recvComm);
  ResultT (*closeListen)(void* listenComm);
  ResultT (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ResultT (*irecvConsumed)(void* recvComm, int n, void* request);
  ResultT (*makeVDevice)(int* d, VDeviceProps<4>* props);
};

struct NetV10 {
  const char* name;
  ResultT (*init)(Logger logFunction, ProfilerCallback profFunction);
  ResultT (*devices)(int* ndev);
  ResultT (*getProperties)(int dev, PropertiesV10* props);
  ResultT (*listen)(int dev, void* handle, void** listenComm);
  ResultT (*connect)(int dev, CommConfig* config, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ResultT (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ResultT (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ResultT (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ResultT (*deregMr)(void* comm, void* mhandle);
  ResultT (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ResultT (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                   void** request);
  ResultT (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ResultT (*test)(void* request, int* done, int* sizes);
  ResultT (*closeSend)(void* sendComm);
  ResultT (*closeRecv)(void* recvComm);
  ResultT (*closeListen)(void* listenComm);
  ResultT (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ResultT (*irecvConsumed)(void* recvComm, int n, void* request);
  ResultT (*makeVDevice)(int* d, VDeviceProps<4>* props);
};

// v11 and v12 differ only in their properties' layout (and vProps' size in makeVDevice).
template <typename Props, int kDevs>
struct NetV11Layout {
  const char* name;
  ResultT (*init)(void** ctx, uint64_t commId, CommConfig* config, Logger logFunction, ProfilerCallback profFunction);
  ResultT (*devices)(int* ndev);
  ResultT (*getProperties)(int dev, Props* props);
  ResultT (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ResultT (*connect)(void* ctx, int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  ResultT (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  ResultT (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ResultT (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ResultT (*deregMr)(void* comm, void* mhandle);
  ResultT (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ResultT (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                   void** request);
  ResultT (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ResultT (*test)(void* request, int* done, int* sizes);
  ResultT (*closeSend)(void* sendComm);
  ResultT (*closeRecv)(void* recvComm);
  ResultT (*closeListen)(void* listenComm);
  ResultT (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ResultT (*irecvConsumed)(void* recvComm, int n, void* request);
  ResultT (*makeVDevice)(int* d, VDeviceProps<kDevs>* props);
  ResultT (*finalize)(void* ctx);
  ResultT (*setNetAttr)(void* ctx, NetAttr* netAttr);
};
using NetV11 = NetV11Layout<PropertiesV11, 4>;
using NetV12 = NetV11Layout<PropertiesV12, 8>;

// Layout checks on x86-64/aarch64 (LP64), the platforms NCCL plugins are built for: offsets of
// the fields where versions differ, computed by hand from the published field lists.
static_assert(offsetof(PropertiesV6, speed) == 28 && sizeof(PropertiesV6) == 48, "ncclNetProperties_v6_t layout");
static_assert(offsetof(PropertiesV7, netDeviceType) == 48 && sizeof(PropertiesV7) == 56,
              "ncclNetProperties_v7_t layout");
static_assert(sizeof(PropertiesV8) == 64, "ncclNetProperties_v8_t layout");
static_assert(offsetof(PropertiesV9, vProps) == 64 && offsetof(PropertiesV9, maxP2pBytes) == 88 &&
                  sizeof(PropertiesV9) == 104,
              "ncclNetProperties_v9_t layout");
static_assert(offsetof(PropertiesV11, maxMultiRequestSize) == 104 && sizeof(PropertiesV11) == 112,
              "ncclNetProperties_v11_t layout");
static_assert(offsetof(PropertiesV12, maxP2pBytes) == 104 && offsetof(PropertiesV12, railId) == 124 &&
                  sizeof(PropertiesV12) == 128,
              "ncclNetProperties_v12_t layout");
static_assert(sizeof(NetV6) == 17 * sizeof(void*) && sizeof(NetV7) == 19 * sizeof(void*) &&
                  sizeof(NetV8) == 19 * sizeof(void*) && sizeof(NetV9) == 20 * sizeof(void*) &&
                  sizeof(NetV10) == 20 * sizeof(void*) && sizeof(NetV11) == 22 * sizeof(void*),
              "function table sizes");

}  // namespace coll::transport::net::abi
