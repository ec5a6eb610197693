// The NCCL network-plugin ABI, versions 8 to 12, as the test plugins read it.
//
// Written independently of coll's loader (src/transport/net/plugin/) and of NCCL's headers, from the facts of
// NCCL's published net_v6.h .. net_v12.h: the same field order, types and signatures, our own names. If the
// loader's reading of the ABI and this one disagree, the loader tests fail, which is the point: a single header
// shared by the loader and its test plugin would agree with itself whatever NCCL says.
//
// Layouts are pinned below with static_asserts for LP64 (x86-64, aarch64), computed by hand.
#pragma once

#include <cstddef>
#include <cstdint>

namespace colltest {

/// ncclResult_t: an int-sized C enum. Only the values the plugin returns or checks are named.
enum NetResult : int {
  kNetSuccess = 0,
  kNetUnhandledCudaError = 1,
  kNetSystemError = 2,
  kNetInternalError = 3,
  kNetInvalidArgument = 4,
  kNetInvalidUsage = 5,
  kNetRemoteError = 6,
  kNetInProgress = 7,
};

/// ncclDebugLogLevel and the ncclDebugLogSubSys bits the plugin uses.
enum NetLogLevel : int {
  kNetLogNone = 0,
  kNetLogVersion = 1,
  kNetLogWarn = 2,
  kNetLogInfo = 3,
  kNetLogAbort = 4,
  kNetLogTrace = 5,
};
constexpr unsigned long kNetLogSubsysInit = 0x1;
constexpr unsigned long kNetLogSubsysNet = 0x10;

/// ncclDebugLogger_t: printf-style, called by the plugin.
using NetLogger = void (*)(NetLogLevel level, unsigned long subsys, const char* file, int line, const char* fmt, ...);

/// ncclProfilerCallback_t (v10+ init): the plugin may report network events through it; ours never calls it.
using NetProfilerCallback = NetResult (*)(void** eventHandle, int type, void* parentHandle, int64_t pluginId,
                                          void* extData);

// Memory types (ptrSupport bits and regMr's type).
constexpr int kNetPtrHost = 0x1;
constexpr int kNetPtrCuda = 0x2;
constexpr int kNetPtrDmaBuf = 0x4;

/// Bytes the caller reserves for the handle listen() writes and connect() reads.
constexpr size_t kNetHandleMaxSize = 128;
constexpr int kNetTrafficClassUndef = -1;

/// ncclNetDeviceType: int-sized; 0 is host (no device offload).
enum NetDeviceType : int { kNetDeviceHost = 0, kNetDeviceUnpack = 1 };

/// ncclNetDeviceHandle_v8_t .. _v12_t (one layout): the device-offload out-parameter of connect/accept.
struct NetDeviceHandle {
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};

/// ncclNetVDeviceProps_vN_t: a virtual NIC made of up to 4 (v9-v11) or 8 (v12) physical ones.
template <int kMaxDevs>
struct NetVDeviceProps {
  int ndevs;
  int devs[kMaxDevs];
};
using NetVDevicePropsV9 = NetVDeviceProps<4>;
using NetVDevicePropsV10 = NetVDeviceProps<4>;
using NetVDevicePropsV11 = NetVDeviceProps<4>;
using NetVDevicePropsV12 = NetVDeviceProps<8>;

/// ncclNetCommConfig_v10_t .. _v12_t.
struct NetCommConfig {
  int trafficClass;  // kNetTrafficClassUndef when the caller has none
};

/// ncclNetProperties_v6_t: no regIsGlobal, no device-offload fields.
struct NetPropertiesV6 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;  // Mbit/s
  int port;
  float latency;  // microseconds
  int maxComms;
  int maxRecvs;
};

/// ncclNetProperties_v7_t: v6 and the device-offload type and version.
struct NetPropertiesV7 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
};

/// ncclNetProperties_v8_t.
struct NetPropertiesV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;  // Mbit/s
  int port;
  float latency;  // microseconds
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;
  int netDeviceVersion;
};

/// ncclNetProperties_v9_t and _v10_t (one layout): forceFlush after regIsGlobal; vProps and the size limits last.
struct NetPropertiesV9 {
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
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDevicePropsV9 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
};
using NetPropertiesV10 = NetPropertiesV9;

/// ncclNetProperties_v11_t: v10 plus maxMultiRequestSize.
struct NetPropertiesV11 {
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
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDevicePropsV11 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};

/// ncclNetProperties_v12_t: vProps grows to 8 devices; railId and planeId (int16_t) at the end.
struct NetPropertiesV12 {
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
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDevicePropsV12 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
};

/// ncclNetCommAttr_v11_t / _v12_t and ncclNetAttr_v11_t / _v12_t (setNetAttr's argument).
struct NetCommAttr {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
};
struct NetAttr {
  NetCommAttr sendCommAttr;
  NetCommAttr recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
};

// The function tables. Every call is non-blocking: connect/accept return success with a NULL comm until the
// connection is up; isend/irecv may return success with a NULL request when they cannot post now; test reports
// completion. Sizes are int in v8, size_t from v9 on (isend/irecv only: iflush and test keep int).

/// ncclNet_v6_t: connect and accept without a device handle; regMr with an int size; nothing after closeListen.
struct NetV6 {
  const char* name;
  NetResult (*init)(NetLogger logFunction);
  NetResult (*devices)(int* ndev);
  NetResult (*getProperties)(int dev, NetPropertiesV6* props);
  NetResult (*listen)(int dev, void* handle, void** listenComm);
  NetResult (*connect)(int dev, void* handle, void** sendComm);
  NetResult (*accept)(void* listenComm, void** recvComm);
  NetResult (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  NetResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  NetResult (*deregMr)(void* comm, void* mhandle);
  NetResult (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  NetResult (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  NetResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  NetResult (*test)(void* request, int* done, int* sizes);
  NetResult (*closeSend)(void* sendComm);
  NetResult (*closeRecv)(void* recvComm);
  NetResult (*closeListen)(void* listenComm);
};

/// ncclNet_v7_t: the device handle in connect and accept; getDeviceMr and irecvConsumed; regMr still an int size.
struct NetV7 {
  const char* name;
  NetResult (*init)(NetLogger logFunction);
  NetResult (*devices)(int* ndev);
  NetResult (*getProperties)(int dev, NetPropertiesV7* props);
  NetResult (*listen)(int dev, void* handle, void** listenComm);
  NetResult (*connect)(int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  NetResult (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  NetResult (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  NetResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  NetResult (*deregMr)(void* comm, void* mhandle);
  NetResult (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  NetResult (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  NetResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  NetResult (*test)(void* request, int* done, int* sizes);
  NetResult (*closeSend)(void* sendComm);
  NetResult (*closeRecv)(void* recvComm);
  NetResult (*closeListen)(void* listenComm);
  NetResult (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  NetResult (*irecvConsumed)(void* recvComm, int n, void* request);
};

/// ncclNet_v8_t.
struct NetV8 {
  const char* name;
  NetResult (*init)(NetLogger logFunction);
  NetResult (*devices)(int* ndev);
  NetResult (*getProperties)(int dev, NetPropertiesV8* props);
  NetResult (*listen)(int dev, void* handle, void** listenComm);
  NetResult (*connect)(int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  NetResult (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  NetResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  NetResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  NetResult (*deregMr)(void* comm, void* mhandle);
  NetResult (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  NetResult (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  NetResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  NetResult (*test)(void* request, int* done, int* sizes);
  NetResult (*closeSend)(void* sendComm);
  NetResult (*closeRecv)(void* recvComm);
  NetResult (*closeListen)(void* listenComm);
  NetResult (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  NetResult (*irecvConsumed)(void* recvComm, int n, void* request);
};

/// ncclNet_v9_t: size_t sizes in isend/irecv; makeVDevice at the end.
struct NetV9 {
  const char* name;
  NetResult (*init)(NetLogger logFunction);
  NetResult (*devices)(int* ndev);
  NetResult (*getProperties)(int dev, NetPropertiesV9* props);
  NetResult (*listen)(int dev, void* handle, void** listenComm);
  NetResult (*connect)(int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  NetResult (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  NetResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  NetResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  NetResult (*deregMr)(void* comm, void* mhandle);
  NetResult (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  NetResult (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  NetResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  NetResult (*test)(void* request, int* done, int* sizes);
  NetResult (*closeSend)(void* sendComm);
  NetResult (*closeRecv)(void* recvComm);
  NetResult (*closeListen)(void* listenComm);
  NetResult (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  NetResult (*irecvConsumed)(void* recvComm, int n, void* request);
  NetResult (*makeVDevice)(int* d, NetVDevicePropsV9* props);
};

/// ncclNet_v10_t: init takes a profiler callback; connect takes a config (second argument); isend/irecv take
/// profiler handles before the request.
struct NetV10 {
  const char* name;
  NetResult (*init)(NetLogger logFunction, NetProfilerCallback profFunction);
  NetResult (*devices)(int* ndev);
  NetResult (*getProperties)(int dev, NetPropertiesV10* props);
  NetResult (*listen)(int dev, void* handle, void** listenComm);
  NetResult (*connect)(int dev, NetCommConfig* config, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  NetResult (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  NetResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  NetResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  NetResult (*deregMr)(void* comm, void* mhandle);
  NetResult (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  NetResult (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                     void** request);
  NetResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  NetResult (*test)(void* request, int* done, int* sizes);
  NetResult (*closeSend)(void* sendComm);
  NetResult (*closeRecv)(void* recvComm);
  NetResult (*closeListen)(void* listenComm);
  NetResult (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  NetResult (*irecvConsumed)(void* recvComm, int n, void* request);
  NetResult (*makeVDevice)(int* d, NetVDevicePropsV10* props);
};

/// ncclNet_v11_t: init creates a per-communicator context (the config moves from connect to init); listen and
/// connect take that context first; finalize and setNetAttr at the end.
struct NetV11 {
  const char* name;
  NetResult (*init)(void** ctx, uint64_t commId, NetCommConfig* config, NetLogger logFunction,
                    NetProfilerCallback profFunction);
  NetResult (*devices)(int* ndev);
  NetResult (*getProperties)(int dev, NetPropertiesV11* props);
  NetResult (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  NetResult (*connect)(void* ctx, int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  NetResult (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  NetResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  NetResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  NetResult (*deregMr)(void* comm, void* mhandle);
  NetResult (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  NetResult (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                     void** request);
  NetResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  NetResult (*test)(void* request, int* done, int* sizes);
  NetResult (*closeSend)(void* sendComm);
  NetResult (*closeRecv)(void* recvComm);
  NetResult (*closeListen)(void* listenComm);
  NetResult (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  NetResult (*irecvConsumed)(void* recvComm, int n, void* request);
  NetResult (*makeVDevice)(int* d, NetVDevicePropsV11* props);
  NetResult (*finalize)(void* ctx);
  NetResult (*setNetAttr)(void* ctx, NetAttr* netAttr);
};

/// ncclNet_v12_t: the v11 table over the v12 properties and 8-device vProps.
struct NetV12 {
  const char* name;
  NetResult (*init)(void** ctx, uint64_t commId, NetCommConfig* config, NetLogger logFunction,
                    NetProfilerCallback profFunction);
  NetResult (*devices)(int* ndev);
  NetResult (*getProperties)(int dev, NetPropertiesV12* props);
  NetResult (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  NetResult (*connect)(void* ctx, int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  NetResult (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  NetResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  NetResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  NetResult (*deregMr)(void* comm, void* mhandle);
  NetResult (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  NetResult (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                     void** request);
  NetResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  NetResult (*test)(void* request, int* done, int* sizes);
  NetResult (*closeSend)(void* sendComm);
  NetResult (*closeRecv)(void* recvComm);
  NetResult (*closeListen)(void* listenComm);
  NetResult (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  NetResult (*irecvConsumed)(void* recvComm, int n, void* request);
  NetResult (*makeVDevice)(int* d, NetVDevicePropsV12* props);
  NetResult (*finalize)(void* ctx);
  NetResult (*setNetAttr)(void* ctx, NetAttr* netAttr);
};

// --- Layouts, by hand, for LP64 ----------------------------------------------------------------------------------
#if defined(__LP64__)
static_assert(sizeof(NetResult) == 4 && sizeof(NetDeviceType) == 4 && sizeof(NetLogLevel) == 4);
static_assert(sizeof(NetDeviceHandle) == 32 && offsetof(NetDeviceHandle, size) == 16);

// v6: three 8-byte fields, six 4-byte fields: 48. v7: two more: 56.
static_assert(offsetof(NetPropertiesV6, speed) == 28 && offsetof(NetPropertiesV6, maxRecvs) == 44);
static_assert(sizeof(NetPropertiesV6) == 48);
static_assert(offsetof(NetPropertiesV7, netDeviceType) == 48 && sizeof(NetPropertiesV7) == 56);

// v8: three 8-byte fields, nine 4-byte fields (60), padded to 64.
static_assert(offsetof(NetPropertiesV8, ptrSupport) == 24 && offsetof(NetPropertiesV8, latency) == 40);
static_assert(offsetof(NetPropertiesV8, netDeviceVersion) == 56 && sizeof(NetPropertiesV8) == 64);

// v9/v10: ten 4-byte fields end at 64; vProps 20 bytes to 84; the size_t limits at 88 and 96.
static_assert(offsetof(NetPropertiesV9, forceFlush) == 32 && offsetof(NetPropertiesV9, speed) == 36);
static_assert(offsetof(NetPropertiesV9, vProps) == 64 && sizeof(NetVDevicePropsV9) == 20);
static_assert(offsetof(NetPropertiesV9, maxP2pBytes) == 88 && offsetof(NetPropertiesV9, maxCollBytes) == 96);
static_assert(sizeof(NetPropertiesV9) == 104);

// v11: maxMultiRequestSize at 104, padded to 112.
static_assert(offsetof(NetPropertiesV11, maxMultiRequestSize) == 104 && sizeof(NetPropertiesV11) == 112);

// v12: vProps 36 bytes to 100; limits at 104 and 112; maxMultiRequestSize 120; railId 124, planeId 126; 128.
static_assert(offsetof(NetPropertiesV12, vProps) == 64 && sizeof(NetVDevicePropsV12) == 36);
static_assert(offsetof(NetPropertiesV12, maxP2pBytes) == 104 && offsetof(NetPropertiesV12, maxCollBytes) == 112);
static_assert(offsetof(NetPropertiesV12, maxMultiRequestSize) == 120 && offsetof(NetPropertiesV12, railId) == 124);
static_assert(offsetof(NetPropertiesV12, planeId) == 126 && sizeof(NetPropertiesV12) == 128);

static_assert(sizeof(NetAttr) == 44);

// Tables: name, then one pointer per function.
static_assert(sizeof(NetV6) == 8 * 17 && offsetof(NetV6, closeListen) == 8 * 16);
static_assert(sizeof(NetV7) == 8 * 19 && offsetof(NetV7, irecvConsumed) == 8 * 18);
static_assert(sizeof(NetV8) == 8 * 19 && offsetof(NetV8, irecvConsumed) == 8 * 18);
static_assert(sizeof(NetV9) == 8 * 20 && offsetof(NetV9, makeVDevice) == 8 * 19);
static_assert(sizeof(NetV10) == 8 * 20 && offsetof(NetV10, isend) == 8 * 10);
static_assert(sizeof(NetV11) == 8 * 22 && offsetof(NetV11, finalize) == 8 * 20);
static_assert(sizeof(NetV12) == 8 * 22 && offsetof(NetV12, setNetAttr) == 8 * 21);
#endif

}  // namespace colltest
