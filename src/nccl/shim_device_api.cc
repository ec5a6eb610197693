// What NCCL 2.30's device API and its one-sided calls ask of the host, as the drop-in answers it.
// coll has no device API (kernels of the user's that call into the library) and no one-sided
// puts yet: those calls are exported, so that programs linking them load and run, and refuse with
// ncclInvalidUsage and a sentence. ncclCommQueryProperties says so up front (deviceApiSupport 0),
// which is how NCCL tells a program to take another path. The team queries are plain arithmetic
// over the communicator and answer: each rank's load/store-accessible team is itself alone.
#include <cstring>

#include "nccl/shim.h"

using collnccl::CommProperties;
using collnccl::Result;
using collnccl::Team;
using collnccl::shim::refuse;
using collnccl::shim::result;
using collnccl::shim::unsupported;

namespace {

constexpr const char* kDeviceApi = "NCCL's device API (ncclDevComm, symmetric device pointers, GIN)";

// comm's rank and size, or false (a refusal recorded) for a communicator coll does not know.
bool shape(ncclComm_t comm, int* rank, int* nranks) {
  return result(collCommUserRank(comm, rank), comm) == collnccl::kSuccess &&
         result(collCommCount(comm, nranks), comm) == collnccl::kSuccess;
}

}  // namespace

NCCL_EXPORT Result pncclCommQueryProperties(ncclComm_t comm, CommProperties* props) {
  if (!props) return refuse(collnccl::kInvalidArgument, "ncclCommQueryProperties", "props is NULL");
  if (props->magic != collnccl::kConfigMagic || props->size < offsetof(CommProperties, nvmlDev) + sizeof(int))
    return refuse(collnccl::kInvalidArgument, "ncclCommQueryProperties",
                  "props was not made from NCCL_COMM_PROPERTIES_INITIALIZER");
  CommProperties p;
  std::memset(&p, 0, sizeof(p));
  if (!shape(comm, &p.rank, &p.nRanks)) return collnccl::kInvalidArgument;
  // A host-only communicator (coll's, on host memory) has no device: -1.
  if (collCommCuDevice(comm, &p.cudaDev) != collSuccess) p.cudaDev = -1;
  p.nvmlDev = p.cudaDev;  // coll does not map CUDA's numbering to NVML's
  p.deviceApiSupport = false;
  p.multimemSupport = false;
  p.ginType = collnccl::kGinTypeNone;
  p.nLsaTeams = p.nRanks;  // every rank a team of its own (no device API)
  p.hostRmaSupport = false;
  p.railedGinType = collnccl::kGinTypeNone;
  // A shorter struct (an older header) gets the fields it has; size, magic, version stay its own.
  size_t n = props->size < sizeof(p) ? props->size : sizeof(p);
  const size_t head = offsetof(CommProperties, rank);
  std::memcpy(reinterpret_cast<char*>(props) + head, reinterpret_cast<const char*>(&p) + head, n - head);
  return collnccl::kSuccess;
}
NCCL_ALIAS(Result, ncclCommQueryProperties, (ncclComm_t comm, CommProperties* props))

NCCL_EXPORT Result pncclDevCommCreate(ncclComm_t, const void*, void*) {
  return unsupported("ncclDevCommCreate", kDeviceApi);
}
NCCL_ALIAS(Result, ncclDevCommCreate, (ncclComm_t comm, const void* reqs, void* outDevComm))

NCCL_EXPORT Result pncclDevCommDestroy(ncclComm_t, const void*) {
  return unsupported("ncclDevCommDestroy", kDeviceApi);
}
NCCL_ALIAS(Result, ncclDevCommDestroy, (ncclComm_t comm, const void* devComm))

// Refusals that take NCCL's parameters by name (the aliases need them) and use none.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define NCCL_NO_POINTER(name, params)                                          \
  NCCL_EXPORT Result p##name params { return unsupported(#name, kDeviceApi); } \
  NCCL_ALIAS(Result, name, params)
NCCL_NO_POINTER(ncclGetLsaMultimemDevicePointer, (ncclWindow_t window, size_t offset, void** outPtr))
NCCL_NO_POINTER(ncclGetMultimemDevicePointer, (ncclWindow_t window, size_t offset, void* multimem, void** outPtr))
NCCL_NO_POINTER(ncclGetLsaDevicePointer, (ncclWindow_t window, size_t offset, int lsaRank, void** outPtr))
NCCL_NO_POINTER(ncclGetPeerDevicePointer, (ncclWindow_t window, size_t offset, int peer, void** outPtr))
NCCL_NO_POINTER(ncclGinBarrierCreateRequirement, (ncclComm_t comm, Team team, int n, void* outHandle, void* outReq))
NCCL_NO_POINTER(ncclGinOutboxCreateRequirement, (int nBlocks, int sizeLog2, void* outHandle, void* outReq))
NCCL_NO_POINTER(ncclGinInboxA2ACreateRequirement,
                (Team peers, int nBlocks, int sizeLog2, void* outHandle, void* outReq))
NCCL_NO_POINTER(ncclLLA2ACreateRequirement, (int nBlocks, int nSlots, void* outHandle, void* outReq))
NCCL_NO_POINTER(ncclLsaBarrierCreateRequirement, (Team team, int nBarriers, void* outHandle, void* outReq))
#pragma GCC diagnostic pop

// No LL all-to-all buffers without the device API: no slots (the error says why).
NCCL_EXPORT int pncclLLA2ACalcSlots(int, int) {
  (void)unsupported("ncclLLA2ACalcSlots", kDeviceApi);
  return 0;
}
NCCL_ALIAS(int, ncclLLA2ACalcSlots, (int maxElts, int maxEltSize))

// Teams: the world is every rank, stride 1; the load/store team (LSA) is the rank alone; the
// rail team (the LSA team's outer factor) is then the world again.
NCCL_EXPORT Team pncclTeamWorld(ncclComm_t comm) {
  Team t{1, 0, 1};
  int rank = 0, n = 1;
  if (shape(comm, &rank, &n)) t = Team{n, rank, 1};
  return t;
}
NCCL_ALIAS(Team, ncclTeamWorld, (ncclComm_t comm))

NCCL_EXPORT Team pncclTeamLsa(ncclComm_t) { return Team{1, 0, 1}; }
NCCL_ALIAS(Team, ncclTeamLsa, (ncclComm_t comm))

NCCL_EXPORT Team pncclTeamRail(ncclComm_t comm) { return pncclTeamWorld(comm); }
NCCL_ALIAS(Team, ncclTeamRail, (ncclComm_t comm))

NCCL_EXPORT int pncclTeamRankToWorld(ncclComm_t comm, Team team, int rank) {
  int me = 0, n = 1;
  if (!shape(comm, &me, &n)) return -1;
  return me + (rank - team.rank) * team.stride;
}
NCCL_ALIAS(int, ncclTeamRankToWorld, (ncclComm_t comm, Team team, int rank))

NCCL_EXPORT int pncclTeamRankToLsa(ncclComm_t comm, Team team, int rank) {
  int me = 0, n = 1;
  if (!shape(comm, &me, &n)) return -1;
  return pncclTeamRankToWorld(comm, team, rank) == me ? 0 : -1;
}
NCCL_ALIAS(int, ncclTeamRankToLsa, (ncclComm_t comm, Team team, int rank))

// One-sided operations (NCCL 2.29) onto coll's: host memory on the ranks of one host; device
// buffers and streams are refused with coll's sentence until the device path has them.
NCCL_EXPORT Result pncclPutSignal(const void* localbuff, size_t count, int datatype, int peer, ncclWindow_t peerWin,
                                  size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                  cudaStream_t stream) {
  return result(collPutSignal(localbuff, count, collnccl::shim::type(datatype), peer,
                              reinterpret_cast<collWindow_t>(peerWin), peerWinOffset, sigIdx, ctx, flags, comm, stream),
                comm);
}
NCCL_ALIAS(Result, ncclPutSignal,
           (const void* localbuff, size_t count, int datatype, int peer, ncclWindow_t peerWin, size_t peerWinOffset,
            int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                               cudaStream_t stream) {
  return result(collSignal(peer, sigIdx, ctx, flags, comm, stream), comm);
}
NCCL_ALIAS(Result, ncclSignal,
           (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream))

// ncclWaitSignalDesc_t and collWaitSignalDesc_t have the same four ints in the same order.
static_assert(sizeof(collnccl::WaitSignalDesc) == sizeof(collWaitSignalDesc_t), "descriptor layouts differ");
NCCL_EXPORT Result pncclWaitSignal(int nDesc, collnccl::WaitSignalDesc* descs, ncclComm_t comm, cudaStream_t stream) {
  return result(collWaitSignal(nDesc, reinterpret_cast<const collWaitSignalDesc_t*>(descs), comm, stream), comm);
}
NCCL_ALIAS(Result, ncclWaitSignal, (int nDesc, collnccl::WaitSignalDesc* descs, ncclComm_t comm, cudaStream_t stream))

// Growing a running communicator by new ranks (NCCL 2.30).
NCCL_EXPORT Result pncclCommGetUniqueId(ncclComm_t, collnccl::UniqueId* id) {
  if (id) std::memset(id, 0, sizeof(*id));
  return unsupported("ncclCommGetUniqueId", "growing a communicator (ncclCommGrow) yet");
}
NCCL_ALIAS(Result, ncclCommGetUniqueId, (ncclComm_t comm, collnccl::UniqueId* id))

NCCL_EXPORT Result pncclCommGrow(ncclComm_t, int, const collnccl::UniqueId*, int, ncclComm_t* newcomm, void*) {
  if (newcomm) *newcomm = nullptr;
  return unsupported("ncclCommGrow", "growing a communicator yet (make a new one with ncclCommInitRank)");
}
NCCL_ALIAS(Result, ncclCommGrow,
           (ncclComm_t comm, int nRanks, const collnccl::UniqueId* id, int rank, ncclComm_t* newcomm, void* config))
