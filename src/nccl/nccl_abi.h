// NCCL 2.30's host ABI as the drop-in library (libnccl.so.2) implements it: the types, sizes and
// values a program compiled against NCCL's nccl.h (and nccl_device/core.h's host functions)
// passes in, written from those headers' published facts. Kept in a namespace of its own, so that
// tests/nccl/abi_check.cc can include this file next to an NCCL header and compare every size,
// offset and value at compile time: CUDA's 2.28 header (a program built against it passes a
// shorter config, a prefix of 2.30's) and 2.30.7's, from the nvidia-nccl wheel.
#pragma once

#include <cstddef>

namespace collnccl {

constexpr int kMajor = 2;
constexpr int kMinor = 30;
constexpr int kPatch = 7;
/// NCCL_VERSION(2, 30, 7): the API level the drop-in implements, what ncclGetVersion reports.
constexpr int kVersionCode = kMajor * 10000 + kMinor * 100 + kPatch;

constexpr int kUniqueIdBytes = 128;
struct UniqueId {
  char internal[kUniqueIdBytes];
};

/// ncclResult_t: coll's codes 0..8 are the same (ncclTimeout came with NCCL 2.30).
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
  kTimeout = 8,
  kNumResults = 9
};

/// ncclDataType_t: the same values as collDataType_t.
enum DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
  kFloat8e4m3 = 10,
  kFloat8e5m2 = 11,
  kNumTypes = 12
};

/// ncclRedOp_t: the built-in ops are coll's; ops from ncclRedOpCreatePreMulSum are numbered from
/// kNumOps, as coll numbers its own.
enum RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kNumOps = 5, kMaxRedOp = 0x7fffffff };

enum ScalarResidence : int { kScalarDevice = 0, kScalarHostImmediate = 1 };

constexpr int kConfigUndefInt = -2147483647 - 1;  // INT_MIN
constexpr unsigned kConfigMagic = 0xcafebeefu;
constexpr unsigned kSimInfoMagic = 0x74685283u;
constexpr int kWinDefault = 0x00;
constexpr int kWinCollSymmetric = 0x01;
constexpr int kWinStrictOrdering = 0x02;
constexpr int kWinRequiredAlignment = 4096;
constexpr int kRevokeDefault = 0x00;
constexpr int kSuspendMem = 0x01;
constexpr int kCtaPolicyDefault = 0x00;
constexpr int kCtaPolicyEfficiency = 0x01;
constexpr int kCtaPolicyZero = 0x02;
constexpr int kShrinkDefault = 0x00;
constexpr int kShrinkAbort = 0x01;

/// ncclConfig_t (ncclConfig_v23000). A program built against an older nccl.h passes a shorter
/// one: `size` says which fields it has.
struct Config {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
};

/// ncclSimInfo_t (ncclSimInfo_v22200).
struct SimInfo {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
};

/// ncclCommMemStat_t.
enum CommMemStat : int {
  kStatGpuMemSuspend = 0,
  kStatGpuMemSuspended = 1,
  kStatGpuMemPersist = 2,
  kStatGpuMemTotal = 3
};

/// ncclWaitSignalDesc_t.
struct WaitSignalDesc {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
};

// nccl_device/core.h's host side.

/// ncclTeam_t: the ranks nRanks apart by stride, this rank at `rank` among them.
struct Team {
  int nRanks, rank, stride;
};

/// ncclGinType_t.
enum GinType : int { kGinTypeNone = 0, kGinTypeProxy = 2, kGinTypeGdaki = 3, kGinTypeGpi = 4 };

/// ncclCommProperties_t; NCCL_COMM_PROPERTIES_INITIALIZER sets size, magic and version.
struct CommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  GinType ginType;
  int nLsaTeams;
  bool hostRmaSupport;
  GinType railedGinType;
};

}  // namespace collnccl
