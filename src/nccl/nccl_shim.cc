// libnccl.so.2, the drop-in: NCCL 2.30's host entry points mapped onto coll.h, for programs built
// against NCCL's nccl.h. Only coll.h is used (a client of the public API, as python/ is). This
// file: versions, ids, communicators, reduction operators, collectives and groups; shim_errors.cc
// has the error model, shim_memory.cc registration, windows and suspension, shim_params.cc the
// parameter API, shim_device_api.cc what NCCL's device API and one-sided calls need on the host.
//
// Every entry point exists twice, as NCCL ships it: pncclX does the work and ncclX is a weak alias
// of it. Host buffers work everywhere, as in coll. Under the drop-in, as with NCCL, a transfer has
// no deadline unless COLL_TIMEOUT_MS (or NCCL_TIMEOUT_MS) is set: frameworks keep their own
// watchdogs. A dead peer still fails the operation naming it.
#include <cstdint>
#include <cstring>
#include <string>

#include "nccl/shim.h"

using collnccl::Config;
using collnccl::Result;
using collnccl::SimInfo;
using collnccl::UniqueId;
using collnccl::shim::refuse;
using collnccl::shim::result;
using collnccl::shim::type;

static_assert(sizeof(UniqueId) == sizeof(collUniqueId), "ncclUniqueId and collUniqueId differ in size");

namespace {

bool isBool01(int v) { return v == collnccl::kConfigUndefInt || v == 0 || v == 1; }
bool atLeast(int v, int lo) { return v == collnccl::kConfigUndefInt || v >= lo; }

// Reads an NCCL config into coll's, checking it as NCCL does (size, magic, version). Fields a
// shorter (older) config lacks keep their defaults. Of NCCL's fields, blocking and commName
// apply; the others are checked and have no effect on coll (README, "NCCL drop-in").
Result readConfig(const Config* in, collConfig_t* out, const char* fn) {
  if (!in) return collnccl::kSuccess;
  if (in->magic != collnccl::kConfigMagic)
    return refuse(collnccl::kInvalidArgument, fn,
                  "the config's magic is not NCCL's (start from NCCL_CONFIG_INITIALIZER)");
  if (in->size < offsetof(Config, blocking) + sizeof(int) || in->size > (size_t{1} << 16))
    return refuse(collnccl::kInvalidArgument, fn,
                  "the config's size " + std::to_string(in->size) + " is not one of an ncclConfig_t");
  if (in->version < 21400)
    return refuse(collnccl::kInvalidArgument, fn,
                  "the config's version " + std::to_string(in->version) + " is older than NCCL 2.14's");
  Config c;
  std::memset(&c, 0, sizeof(c));
  const int undef = collnccl::kConfigUndefInt;
  c.blocking = c.cgaClusterSize = c.minCTAs = c.maxCTAs = c.splitShare = c.trafficClass = undef;
  c.collnetEnable = c.CTAPolicy = c.shrinkShare = c.nvlsCTAs = c.nChannelsPerNetPeer = c.nvlinkCentricSched = undef;
  c.graphUsageMode = c.numRmaCtx = c.maxP2pPeers = c.graphStreamOrdering = undef;
  std::memcpy(&c, in, in->size < sizeof(Config) ? in->size : sizeof(Config));
  auto bad = [&](const char* field, int v, const char* want) {
    return refuse(collnccl::kInvalidArgument, fn,
                  std::string("config.") + field + "=" + std::to_string(v) + " is invalid (" + want + ")");
  };
  if (!isBool01(c.blocking)) return bad("blocking", c.blocking, "0 or 1");
  if (c.cgaClusterSize != undef && (c.cgaClusterSize < 0 || c.cgaClusterSize > 8))
    return bad("cgaClusterSize", c.cgaClusterSize, "0 to 8");
  if (!atLeast(c.minCTAs, 1)) return bad("minCTAs", c.minCTAs, "at least 1");
  if (!atLeast(c.maxCTAs, 1)) return bad("maxCTAs", c.maxCTAs, "at least 1");
  if (c.minCTAs != undef && c.maxCTAs != undef && c.minCTAs > c.maxCTAs)
    return bad("minCTAs", c.minCTAs, "at most maxCTAs");
  if (!isBool01(c.splitShare)) return bad("splitShare", c.splitShare, "0 or 1");
  if (!atLeast(c.trafficClass, 0)) return bad("trafficClass", c.trafficClass, "0 or more");
  if (!isBool01(c.collnetEnable)) return bad("collnetEnable", c.collnetEnable, "0 or 1");
  if (c.CTAPolicy != undef && (c.CTAPolicy & ~(collnccl::kCtaPolicyEfficiency | collnccl::kCtaPolicyZero)) != 0)
    return bad("CTAPolicy", c.CTAPolicy, "NCCL_CTA_POLICY_DEFAULT, _EFFICIENCY or _ZERO");
  if (!isBool01(c.shrinkShare)) return bad("shrinkShare", c.shrinkShare, "0 or 1");
  if (!atLeast(c.nvlsCTAs, 1)) return bad("nvlsCTAs", c.nvlsCTAs, "at least 1");
  if (!atLeast(c.nChannelsPerNetPeer, 1)) return bad("nChannelsPerNetPeer", c.nChannelsPerNetPeer, "at least 1");
  if (!isBool01(c.nvlinkCentricSched)) return bad("nvlinkCentricSched", c.nvlinkCentricSched, "0 or 1");
  if (!atLeast(c.graphUsageMode, 0)) return bad("graphUsageMode", c.graphUsageMode, "0 or more");
  if (!atLeast(c.numRmaCtx, 1)) return bad("numRmaCtx", c.numRmaCtx, "at least 1");
  if (!atLeast(c.maxP2pPeers, 1)) return bad("maxP2pPeers", c.maxP2pPeers, "at least 1");
  if (!isBool01(c.graphStreamOrdering)) return bad("graphStreamOrdering", c.graphStreamOrdering, "0 or 1");
  if (c.blocking != undef) out->blocking = c.blocking;
  if (in->size >= offsetof(Config, commName) + sizeof(const char*) && c.commName) out->commName = c.commName;
  return collnccl::kSuccess;
}

// NCCL's variables keep working: coll reads NCCL_X for its parameter COLL_X when COLL_X is not
// set, which libcoll alone does not do. Turned on through coll's parameter table as the library
// loads, before any parameter is read; a user's COLL_NCCL_TWINS=0 still wins.
__attribute__((constructor)) void honourNcclVariables() { (void)collParamNcclTwins(1); }

// NCCL has no data-path deadline: unless COLL_TIMEOUT_MS (or its twin) is set, or the config
// already says, a communicator made through the drop-in waits as long as its peers live.
void noDeadlineByDefault(collConfig_t* cfg) {
  int set = 0;
  const char* value = nullptr;
  if (cfg->timeoutMs == COLL_CONFIG_UNDEF_INT && collParamGet("COLL_TIMEOUT_MS", &value, &set) == collSuccess && !set)
    cfg->timeoutMs = 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Versions, ids, errors

NCCL_EXPORT Result pncclGetVersion(int* version) {
  if (!version) return refuse(collnccl::kInvalidArgument, "ncclGetVersion", "version is NULL");
  *version = collnccl::kVersionCode;
  return collnccl::kSuccess;
}
NCCL_ALIAS(Result, ncclGetVersion, (int* version))

NCCL_EXPORT Result pncclGetUniqueId(UniqueId* id) {
  return result(collGetUniqueId(reinterpret_cast<collUniqueId*>(id)));
}
NCCL_ALIAS(Result, ncclGetUniqueId, (UniqueId * id))

// ---------------------------------------------------------------------------------------------
// Communicators

NCCL_EXPORT Result pncclCommInitRankConfig(ncclComm_t* comm, int nranks, UniqueId id, int rank, Config* config) {
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  Result r = readConfig(config, &cfg, "ncclCommInitRankConfig");
  if (r != collnccl::kSuccess) return r;
  noDeadlineByDefault(&cfg);
  collUniqueId cid;
  std::memcpy(&cid, &id, sizeof(cid));
  return result(collCommInitRankConfig(comm, nranks, cid, rank, &cfg));
}
NCCL_ALIAS(Result, ncclCommInitRankConfig, (ncclComm_t * comm, int nranks, UniqueId id, int rank, Config* config))

NCCL_EXPORT Result pncclCommInitRank(ncclComm_t* comm, int nranks, UniqueId id, int rank) {
  return pncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}
NCCL_ALIAS(Result, ncclCommInitRank, (ncclComm_t * comm, int nranks, UniqueId id, int rank))

NCCL_EXPORT Result pncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nId, UniqueId* ids,
                                             Config* config) {
  if (nId < 1 || !ids)
    return refuse(collnccl::kInvalidArgument, "ncclCommInitRankScalable",
                  "nId=" + std::to_string(nId) + " unique ids at " + (ids ? "a pointer" : "NULL"));
  // Every rank passes the same ids; coll's bootstrap has one root, the first id's (the process
  // that made it serves it), so the others are not needed.
  return pncclCommInitRankConfig(comm, nranks, ids[0], rank, config);
}
NCCL_ALIAS(Result, ncclCommInitRankScalable,
           (ncclComm_t * comm, int nranks, int rank, int nId, UniqueId* ids, Config* config))

// NCCL's documented equivalent of ncclCommInitAll, one init per rank in a group: collCommInitAll
// takes no config, and the drop-in's communicators need one (noDeadlineByDefault). NCCL puts rank
// i on device i when devlist is NULL; coll's host-only ranks are right only where there is no
// device.
NCCL_EXPORT Result pncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (!comms || ndev < 1) return result(collCommInitAll(comms, ndev, devlist));  // coll's own sentence
  int devices = 0;
  if (collGetDeviceCount(&devices) != collSuccess) devices = 0;
  collUniqueId id;
  collResult_t r = collGetUniqueId(&id);
  if (r != collSuccess) return result(r);
  r = collGroupStart();
  if (r != collSuccess) return result(r);
  for (int i = 0; i < ndev; ++i) {
    collConfig_t cfg = COLL_CONFIG_INITIALIZER;
    noDeadlineByDefault(&cfg);
    cfg.cudaDev = devlist ? devlist[i] : (devices > 0 ? i : -1);
    (void)collCommInitRankConfig(&comms[i], ndev, id, i, &cfg);  // queued: collGroupEnd runs them
  }
  return result(collGroupEnd());
}
NCCL_ALIAS(Result, ncclCommInitAll, (ncclComm_t * comms, int ndev, const int* devlist))

NCCL_EXPORT Result pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, Config* config) {
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  Result r = readConfig(config, &cfg, "ncclCommSplit");
  if (r != collnccl::kSuccess) return r;
  noDeadlineByDefault(&cfg);
  return result(collCommSplit(comm, color, key, newcomm, &cfg), comm);
}
NCCL_ALIAS(Result, ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, Config* config))

NCCL_EXPORT Result pncclCommFinalize(ncclComm_t comm) { return result(collCommFinalize(comm), comm); }
NCCL_ALIAS(Result, ncclCommFinalize, (ncclComm_t comm))

NCCL_EXPORT Result pncclCommDestroy(ncclComm_t comm) { return result(collCommDestroy(comm)); }
NCCL_ALIAS(Result, ncclCommDestroy, (ncclComm_t comm))

NCCL_EXPORT Result pncclCommAbort(ncclComm_t comm) { return result(collCommAbort(comm)); }
NCCL_ALIAS(Result, ncclCommAbort, (ncclComm_t comm))

NCCL_EXPORT Result pncclCommGetAsyncError(ncclComm_t comm, Result* asyncError) {
  collResult_t a = collSuccess;
  collResult_t r = collCommGetAsyncError(comm, asyncError ? &a : nullptr);
  if (r == collSuccess) *asyncError = static_cast<Result>(a);
  return result(r, comm);
}
NCCL_ALIAS(Result, ncclCommGetAsyncError, (ncclComm_t comm, Result* asyncError))

NCCL_EXPORT Result pncclCommCount(const ncclComm_t comm, int* count) { return result(collCommCount(comm, count)); }
NCCL_ALIAS(Result, ncclCommCount, (const ncclComm_t comm, int* count))

NCCL_EXPORT Result pncclCommCuDevice(const ncclComm_t comm, int* device) {
  return result(collCommCuDevice(comm, device));
}
NCCL_ALIAS(Result, ncclCommCuDevice, (const ncclComm_t comm, int* device))

NCCL_EXPORT Result pncclCommUserRank(const ncclComm_t comm, int* rank) { return result(collCommUserRank(comm, rank)); }
NCCL_ALIAS(Result, ncclCommUserRank, (const ncclComm_t comm, int* rank))

NCCL_EXPORT Result pncclCommShrink(ncclComm_t comm, int* exclude, int count, ncclComm_t* newcomm, Config* config,
                                   int flags) {
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  Result r = readConfig(config, &cfg, "ncclCommShrink");
  if (r != collnccl::kSuccess) return r;
  noDeadlineByDefault(&cfg);
  return result(collCommShrink(comm, exclude, count, newcomm, &cfg, flags), comm);
}
NCCL_ALIAS(Result, ncclCommShrink, (ncclComm_t c, int* ex, int n, ncclComm_t* nc, Config* cfg, int flags))

NCCL_EXPORT Result pncclCommRevoke(ncclComm_t comm, int flags) { return result(collCommRevoke(comm, flags), comm); }
NCCL_ALIAS(Result, ncclCommRevoke, (ncclComm_t comm, int flags))

// ---------------------------------------------------------------------------------------------
// Reduction operators

NCCL_EXPORT Result pncclRedOpCreatePreMulSum(int* op, void* scalar, int datatype, int residence, ncclComm_t comm) {
  const collDataType_t t = type(datatype);
  collRedOp_t out;
  collResult_t r =
      collRedOpCreatePreMulSum(op ? &out : nullptr, scalar, t, static_cast<collScalarResidence_t>(residence), comm);
  if (r == collSuccess) *op = static_cast<int>(out);
  return result(r);
}
NCCL_ALIAS(Result, ncclRedOpCreatePreMulSum, (int* op, void* scalar, int datatype, int residence, ncclComm_t comm))

NCCL_EXPORT Result pncclRedOpDestroy(int op, ncclComm_t comm) {
  return result(collRedOpDestroy(static_cast<collRedOp_t>(op), comm), comm);
}
NCCL_ALIAS(Result, ncclRedOpDestroy, (int op, ncclComm_t comm))

// ---------------------------------------------------------------------------------------------
// Collectives and point to point

NCCL_EXPORT Result pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, int datatype, int op,
                                  ncclComm_t comm, cudaStream_t stream) {
  const collDataType_t t = type(datatype);
  return result(collAllReduce(sendbuff, recvbuff, count, t, static_cast<collRedOp_t>(op), comm, stream), comm);
}
NCCL_ALIAS(Result, ncclAllReduce,
           (const void* s, void* r, size_t count, int datatype, int op, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, int datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream) {
  const collDataType_t t = type(datatype);
  return result(collBroadcast(sendbuff, recvbuff, count, t, root, comm, stream), comm);
}
NCCL_ALIAS(Result, ncclBroadcast,
           (const void* s, void* r, size_t count, int datatype, int root, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclBcast(void* buff, size_t count, int datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  const collDataType_t t = type(datatype);
  return result(collBroadcast(buff, buff, count, t, root, comm, stream), comm);
}
NCCL_ALIAS(Result, ncclBcast, (void* buff, size_t count, int datatype, int root, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclReduce(const void* sendbuff, void* recvbuff, size_t count, int datatype, int op, int root,
                               ncclComm_t comm, cudaStream_t stream) {
  const collDataType_t t = type(datatype);
  return result(collReduce(sendbuff, recvbuff, count, t, static_cast<collRedOp_t>(op), root, comm, stream), comm);
}
NCCL_ALIAS(Result, ncclReduce,
           (const void* s, void* r, size_t count, int datatype, int op, int root, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, int datatype, ncclComm_t comm,
                                  cudaStream_t stream) {
  const collDataType_t t = type(datatype);
  return result(collAllGather(sendbuff, recvbuff, sendcount, t, comm, stream), comm);
}
NCCL_ALIAS(Result, ncclAllGather,
           (const void* s, void* r, size_t sendcount, int datatype, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, int datatype, int op,
                                      ncclComm_t comm, cudaStream_t stream) {
  const collDataType_t t = type(datatype);
  return result(collReduceScatter(sendbuff, recvbuff, recvcount, t, static_cast<collRedOp_t>(op), comm, stream), comm);
}
NCCL_ALIAS(Result, ncclReduceScatter,
           (const void* s, void* r, size_t recvcount, int datatype, int op, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, int datatype, ncclComm_t comm,
                                 cudaStream_t stream) {
  const collDataType_t t = type(datatype);
  return result(collAllToAll(sendbuff, recvbuff, count, t, comm, stream), comm);
}
NCCL_ALIAS(Result, ncclAlltoAll,
           (const void* s, void* r, size_t count, int datatype, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclGather(const void* sendbuff, void* recvbuff, size_t count, int datatype, int root,
                               ncclComm_t comm, cudaStream_t stream) {
  const collDataType_t t = type(datatype);
  return result(collGather(sendbuff, recvbuff, count, t, root, comm, stream), comm);
}
NCCL_ALIAS(Result, ncclGather,
           (const void* s, void* r, size_t count, int datatype, int root, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclScatter(const void* sendbuff, void* recvbuff, size_t count, int datatype, int root,
                                ncclComm_t comm, cudaStream_t stream) {
  const collDataType_t t = type(datatype);
  return result(collScatter(sendbuff, recvbuff, count, t, root, comm, stream), comm);
}
NCCL_ALIAS(Result, ncclScatter,
           (const void* s, void* r, size_t count, int datatype, int root, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclSend(const void* sendbuff, size_t count, int datatype, int peer, ncclComm_t comm,
                             cudaStream_t stream) {
  const collDataType_t t = type(datatype);
  return result(collSend(sendbuff, count, t, peer, comm, stream), comm);
}
NCCL_ALIAS(Result, ncclSend,
           (const void* s, size_t count, int datatype, int peer, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclRecv(void* recvbuff, size_t count, int datatype, int peer, ncclComm_t comm,
                             cudaStream_t stream) {
  const collDataType_t t = type(datatype);
  return result(collRecv(recvbuff, count, t, peer, comm, stream), comm);
}
NCCL_ALIAS(Result, ncclRecv, (void* r, size_t count, int datatype, int peer, ncclComm_t comm, cudaStream_t stream))

NCCL_EXPORT Result pncclGroupStart() { return result(collGroupStart()); }
NCCL_ALIAS(Result, ncclGroupStart, ())

NCCL_EXPORT Result pncclGroupEnd() { return result(collGroupEnd()); }
NCCL_ALIAS(Result, ncclGroupEnd, ())

NCCL_EXPORT Result pncclGroupSimulateEnd(SimInfo* info) {
  if (!info || info->magic != collnccl::kSimInfoMagic || info->size < sizeof(SimInfo))
    return refuse(collnccl::kInvalidArgument, "ncclGroupSimulateEnd",
                  "simInfo is NULL or was not made from NCCL_SIM_INFO_INITIALIZER; the group is still open");
  collSimInfo_t sim = COLL_SIM_INFO_INITIALIZER;
  collResult_t r = collGroupSimulateEnd(&sim);
  if (r == collSuccess) info->estimatedTime = sim.estimatedTime;
  return result(r);
}
NCCL_ALIAS(Result, ncclGroupSimulateEnd, (SimInfo * info))
