// The drop-in's ABI against an NCCL header, at compile time: every size, field offset and enum
// value a program built against nccl.h passes to libnccl.so.2, and the codes coll.h shares with
// it. Nothing runs: this file compiling is the test. Compiled twice: against CUDA's nccl.h (NCCL
// 2.28: its config is a prefix of 2.30's, its version code is older on purpose) and against
// 2.30.7's from the nvidia-nccl wheel (tests/nccl/torch_dropin.sh), with nccl_device/core.h.
#include <nccl.h>
#if NCCL_VERSION_CODE >= 23000
#include <nccl_device/core.h>
#endif

#include <cstddef>

#include "coll/coll.h"
#include "nccl/nccl_abi.h"

namespace n = collnccl;

#define SAME_VALUE(a, b) static_assert(static_cast<long long>(a) == static_cast<long long>(b), #a " != " #b)
// Field f at the same offset and of the same size in NCCL's struct N and ours.
#define SAME_MEMBER(N, ours, f)                                           \
  static_assert(offsetof(N, f) == offsetof(ours, f), #N "." #f " moved"); \
  static_assert(sizeof(N::f) == sizeof(ours::f), #N "." #f " resized")
#define SAME_FIELD(f) SAME_MEMBER(ncclConfig_t, n::Config, f)

#if NCCL_VERSION_CODE >= 23000
SAME_VALUE(NCCL_VERSION_CODE, n::kVersionCode);
SAME_VALUE(NCCL_MAJOR, n::kMajor);
SAME_VALUE(NCCL_MINOR, n::kMinor);
SAME_VALUE(NCCL_PATCH, n::kPatch);
#else
static_assert(NCCL_VERSION_CODE < n::kVersionCode, "the drop-in implements a later API than this header");
#endif

static_assert(sizeof(ncclUniqueId) == sizeof(n::UniqueId), "ncclUniqueId size");
static_assert(sizeof(ncclUniqueId) == sizeof(collUniqueId), "collUniqueId size");
SAME_VALUE(NCCL_UNIQUE_ID_BYTES, n::kUniqueIdBytes);
static_assert(sizeof(ncclComm_t) == sizeof(collComm_t), "communicator handle size");
static_assert(sizeof(cudaStream_t) == sizeof(collStream_t), "stream handle size");

static_assert(sizeof(ncclResult_t) == sizeof(n::Result), "ncclResult_t size");
SAME_VALUE(ncclSuccess, n::kSuccess);
SAME_VALUE(ncclUnhandledCudaError, n::kUnhandledCudaError);
SAME_VALUE(ncclSystemError, n::kSystemError);
SAME_VALUE(ncclInternalError, n::kInternalError);
SAME_VALUE(ncclInvalidArgument, n::kInvalidArgument);
SAME_VALUE(ncclInvalidUsage, n::kInvalidUsage);
SAME_VALUE(ncclRemoteError, n::kRemoteError);
SAME_VALUE(ncclInProgress, n::kInProgress);
#if NCCL_VERSION_CODE >= 23000
SAME_VALUE(ncclTimeout, n::kTimeout);
SAME_VALUE(ncclTimeout, collTimeout);
SAME_VALUE(ncclNumResults, n::kNumResults);
#endif
SAME_VALUE(ncclSuccess, collSuccess);
SAME_VALUE(ncclUnhandledCudaError, collUnhandledCudaError);
SAME_VALUE(ncclSystemError, collSystemError);
SAME_VALUE(ncclInternalError, collInternalError);
SAME_VALUE(ncclInvalidArgument, collInvalidArgument);
SAME_VALUE(ncclInvalidUsage, collInvalidUsage);
SAME_VALUE(ncclRemoteError, collRemoteError);
SAME_VALUE(ncclInProgress, collInProgress);

static_assert(sizeof(ncclDataType_t) == sizeof(n::DataType), "ncclDataType_t size");
SAME_VALUE(ncclInt8, n::kInt8);
SAME_VALUE(ncclChar, n::kInt8);
SAME_VALUE(ncclUint8, n::kUint8);
SAME_VALUE(ncclInt32, n::kInt32);
SAME_VALUE(ncclInt, n::kInt32);
SAME_VALUE(ncclUint32, n::kUint32);
SAME_VALUE(ncclInt64, n::kInt64);
SAME_VALUE(ncclUint64, n::kUint64);
SAME_VALUE(ncclFloat16, n::kFloat16);
SAME_VALUE(ncclHalf, n::kFloat16);
SAME_VALUE(ncclFloat32, n::kFloat32);
SAME_VALUE(ncclFloat, n::kFloat32);
SAME_VALUE(ncclFloat64, n::kFloat64);
SAME_VALUE(ncclDouble, n::kFloat64);
SAME_VALUE(ncclBfloat16, n::kBfloat16);
SAME_VALUE(ncclFloat8e4m3, n::kFloat8e4m3);
SAME_VALUE(ncclFloat8e5m2, n::kFloat8e5m2);
SAME_VALUE(ncclNumTypes, n::kNumTypes);
SAME_VALUE(ncclInt8, collInt8);
SAME_VALUE(ncclUint8, collUint8);
SAME_VALUE(ncclInt32, collInt32);
SAME_VALUE(ncclUint32, collUint32);
SAME_VALUE(ncclInt64, collInt64);
SAME_VALUE(ncclUint64, collUint64);
SAME_VALUE(ncclFloat16, collFloat16);
SAME_VALUE(ncclFloat32, collFloat32);
SAME_VALUE(ncclFloat64, collFloat64);
SAME_VALUE(ncclBfloat16, collBfloat16);

static_assert(sizeof(ncclRedOp_t) == sizeof(n::RedOp), "ncclRedOp_t size");
SAME_VALUE(ncclSum, n::kSum);
SAME_VALUE(ncclProd, n::kProd);
SAME_VALUE(ncclMax, n::kMax);
SAME_VALUE(ncclMin, n::kMin);
SAME_VALUE(ncclAvg, n::kAvg);
SAME_VALUE(ncclNumOps, n::kNumOps);
SAME_VALUE(ncclMaxRedOp, n::kMaxRedOp);
SAME_VALUE(ncclSum, collSum);
SAME_VALUE(ncclProd, collProd);
SAME_VALUE(ncclMax, collMax);
SAME_VALUE(ncclMin, collMin);
SAME_VALUE(ncclAvg, collAvg);
SAME_VALUE(ncclNumOps, collNumOps);
SAME_VALUE(ncclScalarDevice, n::kScalarDevice);
SAME_VALUE(ncclScalarHostImmediate, n::kScalarHostImmediate);
SAME_VALUE(ncclScalarDevice, collScalarDevice);
SAME_VALUE(ncclScalarHostImmediate, collScalarHostImmediate);
SAME_VALUE(NCCL_SPLIT_NOCOLOR, COLL_SPLIT_NOCOLOR);

SAME_VALUE(NCCL_CONFIG_UNDEF_INT, n::kConfigUndefInt);
SAME_VALUE(NCCL_WIN_DEFAULT, n::kWinDefault);
SAME_VALUE(NCCL_WIN_COLL_SYMMETRIC, n::kWinCollSymmetric);
SAME_VALUE(NCCL_CTA_POLICY_DEFAULT, n::kCtaPolicyDefault);
SAME_VALUE(NCCL_CTA_POLICY_EFFICIENCY, n::kCtaPolicyEfficiency);
SAME_VALUE(NCCL_CTA_POLICY_ZERO, n::kCtaPolicyZero);
SAME_VALUE(NCCL_SHRINK_DEFAULT, n::kShrinkDefault);
SAME_VALUE(NCCL_SHRINK_ABORT, n::kShrinkAbort);

#if NCCL_VERSION_CODE >= 23000
static_assert(sizeof(ncclConfig_t) == sizeof(n::Config), "ncclConfig_t size");
#else
static_assert(sizeof(ncclConfig_t) < sizeof(n::Config), "an older ncclConfig_t is a prefix of 2.30's");
#endif
SAME_FIELD(size);
SAME_FIELD(magic);
SAME_FIELD(version);
SAME_FIELD(blocking);
SAME_FIELD(cgaClusterSize);
SAME_FIELD(minCTAs);
SAME_FIELD(maxCTAs);
SAME_FIELD(netName);
SAME_FIELD(splitShare);
SAME_FIELD(trafficClass);
SAME_FIELD(commName);
SAME_FIELD(collnetEnable);
SAME_FIELD(CTAPolicy);
SAME_FIELD(shrinkShare);
SAME_FIELD(nvlsCTAs);
SAME_FIELD(nChannelsPerNetPeer);
SAME_FIELD(nvlinkCentricSched);
#if NCCL_VERSION_CODE >= 23000
SAME_FIELD(graphUsageMode);
SAME_FIELD(numRmaCtx);
SAME_FIELD(maxP2pPeers);
SAME_FIELD(graphStreamOrdering);
SAME_VALUE(NCCL_WIN_STRICT_ORDERING, n::kWinStrictOrdering);
SAME_VALUE(NCCL_WIN_STRICT_ORDERING, COLL_WIN_STRICT_ORDERING);
SAME_VALUE(NCCL_WIN_COLL_SYMMETRIC, COLL_WIN_COLL_SYMMETRIC);
SAME_VALUE(NCCL_WIN_REQUIRED_ALIGNMENT, n::kWinRequiredAlignment);
SAME_VALUE(NCCL_REVOKE_DEFAULT, n::kRevokeDefault);
SAME_VALUE(NCCL_SUSPEND_MEM, n::kSuspendMem);
SAME_VALUE(NCCL_SUSPEND_MEM, COLL_SUSPEND_MEM);
static_assert(sizeof(ncclCommMemStat_t) == sizeof(n::CommMemStat), "ncclCommMemStat_t size");
SAME_VALUE(ncclStatGpuMemSuspend, n::kStatGpuMemSuspend);
SAME_VALUE(ncclStatGpuMemSuspended, n::kStatGpuMemSuspended);
SAME_VALUE(ncclStatGpuMemPersist, n::kStatGpuMemPersist);
SAME_VALUE(ncclStatGpuMemTotal, n::kStatGpuMemTotal);
SAME_VALUE(ncclStatGpuMemSuspend, collStatDeviceMemSuspendable);
SAME_VALUE(ncclStatGpuMemSuspended, collStatDeviceMemSuspended);
SAME_VALUE(ncclStatGpuMemPersist, collStatDeviceMemPersistent);
SAME_VALUE(ncclStatGpuMemTotal, collStatDeviceMemTotal);
static_assert(sizeof(ncclWaitSignalDesc_t) == sizeof(n::WaitSignalDesc), "ncclWaitSignalDesc_t size");
static_assert(offsetof(ncclWaitSignalDesc_t, ctx) == offsetof(n::WaitSignalDesc, ctx), "ctx moved");
// nccl_device/core.h's host side.
static_assert(sizeof(ncclTeam_t) == sizeof(n::Team), "ncclTeam_t size");
static_assert(offsetof(ncclTeam_t, stride) == offsetof(n::Team, stride), "ncclTeam_t.stride moved");
static_assert(sizeof(ncclCommProperties_t) == sizeof(n::CommProperties), "ncclCommProperties_t size");
#define SAME_PROP(f) SAME_MEMBER(ncclCommProperties_t, n::CommProperties, f)
SAME_PROP(rank);
SAME_PROP(nRanks);
SAME_PROP(cudaDev);
SAME_PROP(nvmlDev);
SAME_PROP(deviceApiSupport);
SAME_PROP(multimemSupport);
SAME_PROP(ginType);
SAME_PROP(nLsaTeams);
SAME_PROP(hostRmaSupport);
SAME_PROP(railedGinType);
SAME_VALUE(NCCL_GIN_TYPE_NONE, n::kGinTypeNone);
#endif

static_assert(sizeof(ncclSimInfo_t) == sizeof(n::SimInfo), "ncclSimInfo_t size");
static_assert(offsetof(ncclSimInfo_t, estimatedTime) == offsetof(n::SimInfo, estimatedTime), "estimatedTime moved");

static_assert(sizeof(ncclSimInfo_t) == sizeof(collSimInfo_t), "collSimInfo_t size");
static_assert(offsetof(ncclSimInfo_t, estimatedTime) == offsetof(collSimInfo_t, estimatedTime), "collSimInfo_t");
SAME_VALUE(COLL_SIM_INFO_MAGIC, n::kSimInfoMagic);

// The initializers' magic numbers, through the macros themselves.
constexpr ncclConfig_t kConfig = NCCL_CONFIG_INITIALIZER;
SAME_VALUE(kConfig.magic, n::kConfigMagic);
constexpr ncclSimInfo_t kSim = NCCL_SIM_INFO_INITIALIZER;
SAME_VALUE(kSim.magic, n::kSimInfoMagic);

int main() { return 0; }
