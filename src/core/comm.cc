#include "core/comm.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_set>

#include "base/fault.h"
#include "base/host_id.h"
#include "base/log.h"
#include "base/params.h"
#include "base/random.h"
#include "core/device_enqueue.h"
#include "core/mailbox.h"
#include "core/residency.h"
#include "core/tuning.h"
#include "device/runtime.h"
#include "topo/cpu_place.h"
#include "topo/cuda_probe.h"
#include "topo/host_system.h"
#include "topo/paths.h"
#include "transport/transport.h"

namespace coll {
namespace {

std::mutex gLiveMutex;
std::unordered_set<collComm*> gLive;  // guarded by gLiveMutex
// Raised (under gLiveMutex) each time a communicator leaves gLive: a thread that found a
// communicator live at epoch E knows it is still live while the epoch reads E.
std::atomic<uint64_t> gLiveEpoch{0};
// Guards between their liveness check and their activeCalls increment. A release waits for none
// to be there after it took the communicator out of gLive: then any guard that saw it live has
// counted itself in activeCalls, which the release waits on next.
std::atomic<int> gGuardsEntering{0};
// The communicator this thread's last guard found live, and the epoch it did so at: loops that
// call one communicator pass their guard without gLiveMutex or a hash lookup.
thread_local collComm* tLiveComm = nullptr;
thread_local uint64_t tLiveEpoch = 0;

bool isLive(collComm* comm) {
  if (comm == tLiveComm && gLiveEpoch.load() == tLiveEpoch) return true;
  std::lock_guard<std::mutex> lock(gLiveMutex);
  if (!gLive.count(comm)) return false;
  tLiveComm = comm;
  tLiveEpoch = gLiveEpoch.load();
  return true;
}

// Reports COLL_* variables that no parameter declares, once per process: they are usually typos.
void startupNoticesOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const auto& name : param::unknownEnvNames())
      COLL_LOG(WARN, ENV, "{} is set but is not a coll parameter (see coll-info); it is ignored", name);
    std::string twins, orphans;
    for (const auto& [nccl, twin] : param::ncclTwins()) {
      if (twin.empty())
        orphans += (orphans.empty() ? "" : ", ") + nccl;
      else
        twins += fmt::format("{}{} (use {})", twins.empty() ? "" : ", ", nccl, twin);
    }
    if (param::ncclTwinsOn()) {
      // The NCCL drop-in: twins are read (param.cc), the others do not apply to coll.
      std::string honoured;
      for (const auto& [nccl, twin] : param::ncclTwins())
        if (!twin.empty()) honoured += fmt::format("{}{} as {}", honoured.empty() ? "" : ", ", nccl, twin);
      if (!honoured.empty()) COLL_LOG(INFO, ENV, "NCCL variables read: {}", honoured);
      if (!orphans.empty()) COLL_LOG(INFO, ENV, "NCCL variables that do not apply to coll: {}", orphans);
    } else if (!twins.empty() || !orphans.empty()) {
      COLL_LOG(WARN, ENV, "coll reads COLL_* variables, not NCCL_*: {}{}{} ignored", twins,
               twins.empty() || orphans.empty() ? "" : "; ", orphans.empty() ? "" : orphans + " (no coll twin)");
    }
  });
}

void copyString(char* dst, size_t cap, const std::string& src) {
  std::strncpy(dst, src.c_str(), cap - 1);
  dst[cap - 1] = '\0';
}

Result<int> resolveCudaDevice(int requested) {
  if (requested == -1) return -1;
  // COLL_DEVICE_EMULATION: its devices stand for CUDA's, device 0 being the current one.
  device::Runtime* rt = device::runtime();
  if (rt && rt->emulated()) {
    if (requested == COLL_CONFIG_UNDEF_INT) return 0;
    if (requested < 0 || requested >= rt->deviceCount())
      return COLL_ERROR(collInvalidArgument, FMT_STRING("emulated device {} was requested but {} are emulated"),
                        requested, rt->deviceCount());
    return requested;
  }
  const topo::CudaInfo& cuda = topo::cudaInfo();
  if (requested == COLL_CONFIG_UNDEF_INT) return cuda.deviceCount > 0 ? topo::currentCudaDevice() : -1;
  if (requested < 0 || requested >= cuda.deviceCount)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("CUDA device {} was requested but {} device(s) are usable{}"),
                      requested, cuda.deviceCount, cuda.why.empty() ? "" : " (" + cuda.why + ")");
  return requested;
}

}  // namespace

Result<CommOptions> resolveOptions(const collConfig_t* config, const CommOptions* inherit) {
  CommOptions o;
  if (inherit)
    o = *inherit;
  else {
    o.bootstrapTimeoutMs = params::kBootstrapTimeoutMs.get();
    o.timeoutMs = params::kTimeoutMs.get();
    o.blocking = params::kCommBlocking.get() != 0;
  }
  if (!config) return o;
  if (config->magic != COLL_CONFIG_MAGIC || config->size < offsetof(collConfig_t, commName) + sizeof(char*))
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("the collConfig_t was not initialized with COLL_CONFIG_INITIALIZER (magic {:#x}, "
                                 "size {})"),
                      config->magic, config->size);
  if (config->blocking != COLL_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("config.blocking={} is not 0 or 1"), config->blocking);
    o.blocking = config->blocking == 1;
  }
  if (config->bootstrapTimeoutMs != COLL_CONFIG_UNDEF_INT) {
    if (config->bootstrapTimeoutMs <= 0)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("config.bootstrapTimeoutMs={} is not positive"),
                        config->bootstrapTimeoutMs);
    o.bootstrapTimeoutMs = config->bootstrapTimeoutMs;
  }
  if (config->cudaDev != COLL_CONFIG_UNDEF_INT) {
    if (config->cudaDev < -1)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("config.cudaDev={} is not -1 or a device"), config->cudaDev);
    o.cudaDev = config->cudaDev;
  }
  if (config->commName) o.name = config->commName;
  // timeoutMs came after commName: a config from an older header is shorter and has none.
  if (config->size >= offsetof(collConfig_t, timeoutMs) + sizeof(int) && config->timeoutMs != COLL_CONFIG_UNDEF_INT) {
    if (config->timeoutMs < 0)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("config.timeoutMs={} is negative"), config->timeoutMs);
    // 0: no deadline (NCCL's behaviour, which the drop-in keeps): INT_MAX ms is 24.8 days.
    o.timeoutMs = config->timeoutMs == 0 ? INT_MAX : config->timeoutMs;
  }
  return o;
}

collComm* newComm(int rank, int nranks, const CommOptions& options) {
  auto* c = new collComm();
  c->rank = rank;
  c->nranks = nranks;
  c->sendsTo.assign(static_cast<size_t>(nranks), 0);
  c->recvsFrom.assign(static_cast<size_t>(nranks), 0);
  c->options = options;
  c->timeoutMs.store(options.timeoutMs);
  c->hostQueue = std::make_unique<HostQueue>(c);
  std::lock_guard<std::mutex> lock(gLiveMutex);
  gLive.insert(c);
  return c;
}

Status releaseComm(collComm* comm, Release how) {
  {
    std::lock_guard<std::mutex> lock(gLiveMutex);
    if (gLive.erase(comm) == 0) return Status(collInvalidArgument, "the communicator was destroyed or never created");
    gLiveEpoch.fetch_add(1);
  }
  // A guard that saw comm live before the epoch rose is now in activeCalls (see gGuardsEntering).
  while (gGuardsEntering.load() != 0) std::this_thread::yield();
  // Only now is comm known to be ours to read.
  // A non-blocking init, split or finalize still running on initThread is stopped, not waited for.
  if (how == Release::kAbort || comm->asyncError.load() == collInProgress || comm->finalizing.load())
    comm->abortFlag.store(true);
  if (comm->initThread.joinable()) comm->initThread.join();
  // Work still queued or running on host streams is cancelled, and what runs is aborted: its
  // peers may never reach it, and a destroy must not wait for them (the streams say why).
  // Queued items are cancelled before the abort flag rises, so that a stream's first error is
  // the cancellation's sentence, not the running item's abort.
  const char* why = how == Release::kAbort ? "collCommAbort was called" : "collCommDestroy was called";
  if (how == Release::kAbort && comm->flight) comm->flight->dump(why);
  // Tagged requests end (their waiters wake with `why`) and the internal communicator goes.
  if (comm->mailbox) {
    comm->mailbox->shutdown(why, how == Release::kAbort || comm->abortFlag.load());
    comm->mailbox.reset();
  }
  bool busy = comm->hostQueue->busy();
  comm->hostQueue->cancel(why);
  if (busy) comm->abortFlag.store(true);
  comm->hostQueue->shutdown(why);
  // Launches on the device end at their next wait when aborted; a destroy lets them finish.
  stopDevice(comm, how == Release::kAbort || comm->abortFlag.load());
  // Calls blocked on this comm notice the abort flag within one poll slice and leave.
  while (comm->activeCalls.load() > 0) usleep(1000);
  comm->magic = 0;
  delete comm;
  return Status::ok();
}

void keepFailure(collComm* comm, const Status& s) {
  {  // the sentence before the state (collGetLastError right after collCommGetAsyncError)
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    if (comm->firstError.empty()) comm->firstError = s.message();
    comm->lastError = s.message();
  }
  int ok = collSuccess;
  comm->asyncError.compare_exchange_strong(ok, s.code());
}

Status checkReady(const collComm* comm, bool allowRevoked, bool queued) {
  int state = comm->asyncError.load();
  // (A queued call meets collInProgress only while a non-blocking split uses the bootstrap: the
  // split waits for it, so it goes on.)
  if (state == collInProgress && !queued)
    return Status(collInvalidUsage, "the communicator is still initializing (poll collCommGetAsyncError)");
  if (comm->revoked.load(std::memory_order_acquire)) {
    if (allowRevoked) return Status::ok();
    return Status(collInvalidUsage,
                  "the communicator was revoked (collCommRevoke): only split, shrink and destroy remain");
  }
  if (state != collSuccess && state != collInProgress) {
    // The first failure's sentence, so that a caller who missed it (a helper's unchecked call)
    // still learns the cause from the next call.
    std::string first;
    {
      std::lock_guard<std::mutex> lock(comm->errorMutex);
      first = comm->firstError;
    }
    return COLL_ERROR(static_cast<collResult_t>(state),
                      FMT_STRING("the communicator is broken by an earlier error ({}){}"),
                      resultName(static_cast<collResult_t>(state)), first.empty() ? "" : ": " + first);
  }
  if (comm->finalized.load()) return Status(collInvalidUsage, "the communicator was already finalized");
  if (comm->finalizing.load() && !queued)
    return Status(collInvalidUsage,
                  "the communicator is being finalized (non-blocking collCommFinalize: poll collCommGetAsyncError)");
  if (comm->suspended.load(std::memory_order_acquire))
    return Status(collInvalidUsage, "the communicator is suspended (collCommSuspend): call collCommResume first");
  return Status::ok();
}

CallGuard::CallGuard(collComm* comm) : comm_(nullptr) {
  if (!comm) {
    status_ = Status(collInvalidArgument, "the communicator is NULL");
    return;
  }
  // Sequentially consistent throughout: the release's epoch increment and its read of
  // gGuardsEntering must not pass this guard's increment and epoch read (Dekker's pattern).
  gGuardsEntering.fetch_add(1);
  bool live = isLive(comm);
  if (live) comm->activeCalls.fetch_add(1);
  gGuardsEntering.fetch_sub(1);
  if (!live) {
    status_ = Status(collInvalidArgument, "the communicator was destroyed or never created");
    return;
  }
  comm_ = comm;
}

CallGuard::~CallGuard() {
  if (comm_) comm_->activeCalls.fetch_sub(1);
}

// The host's topology, when it is asked for: COLL_TOPO_FILE (which must then be valid),
// COLL_TOPO_DUMP_FILE (rank 0 writes it) or TOPO lines at INFO (the NIC by locality for this
// rank's NUMA node). Detection is skipped otherwise: it loads the PCI tree, tens of ms. The ring
// order needs none of it (core/tuning.cc: from what the ranks told at init).
static Status reportTopology(collComm* comm) {
  bool info = log::enabled(log::Level::INFO, log::TOPO);
  bool dump = comm->rank == 0 && !params::kTopoDumpFile.get().empty();
  if (!info && !dump && params::kTopoFile.get().empty()) return Status::ok();
  COLL_ASSIGN_OR_RETURN(topo::System sys, localSystem());
  if (dump) COLL_TRY(dumpSystemIfAsked(sys));
  if (!info) return Status::ok();
  // The NUMA node this rank is bound to, as it told the others at init (0 when unbound).
  int numa = std::max<int>(0, comm->bootstrap->peers()[comm->rank].numa);
  std::vector<int> nic = topo::assignNics(sys, {topo::Endpoint{topo::Endpoint::kNuma, numa}});
  std::string nicText = "none";
  if (nic[0] >= 0) {
    topo::Path p = topo::pathBetween(sys, {topo::Endpoint::kNuma, numa}, {topo::Endpoint::kNic, nic[0]});
    nicText = fmt::format("{} ({}, {})", sys.nics[nic[0]].name, sys.nics[nic[0]].kind, topo::pathName(p.type));
  }
  COLL_LOG(INFO, TOPO, "rank {} on {} [{}]: {} package(s), {} NUMA node(s), {} GPU(s), {} NIC(s); NUMA {} -> NIC {}",
           comm->rank, sys.host, sys.source, sys.packages, sys.numa.size(), sys.gpus.size(), sys.nics.size(), numa,
           nicText);
  return Status::ok();
}

namespace {
using SelectFn = const transport::Transport* (*)(const bootstrap::RankInfo&, const bootstrap::RankInfo&);
// The transport `select` picks for each peer (what connections will use when first needed),
// counted by name: "<lead>shm to 3 peers, tcp to 4 peers"; "" for a single rank.
std::string countTransports(const collComm* comm, SelectFn select, const char* lead) {
  const auto& peers = comm->bootstrap->peers();
  std::map<std::string, int> perTransport;
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank) continue;
    const transport::Transport* t = select(peers[comm->rank], peers[p]);
    std::string detail = t ? t->detail() : std::string();
    ++perTransport[t ? (detail.empty() ? std::string(t->name()) : fmt::format("{} [{}]", t->name(), detail)) : "none"];
  }
  std::string text;
  const char* sep = lead;
  for (const auto& [name, count] : perTransport) {
    text += fmt::format("{}{} to {} peer{}", sep, name, count, count == 1 ? "" : "s");
    sep = ", ";
  }
  return text;
}
}  // namespace

std::string transportsText(const collComm* comm) {
  std::string text = countTransports(comm, transport::selectTransport, "; ");
  // Device buffers take the device transports (p2p, host-staged shm, the proxied network).
  if (comm->cudaDev >= 0 && comm->nranks > 1)
    text += countTransports(comm, transport::selectDeviceTransport, "; device buffers: ");
  return text;
}

Status initComm(collComm* comm, const IdContents& id) {
  COLL_TRY(param::validateAll());
  COLL_TRY(checkDataPathParams());
  COLL_TRY(transport::checkNetwork());
  startupNoticesOnce();
  // As NCCL: one version line, from the process that holds rank 0.
  if (comm->rank == 0) log::versionOnce(fmt::format("coll version {}.{}.{}", COLL_MAJOR, COLL_MINOR, COLL_PATCH));
  COLL_ASSIGN_OR_RETURN(comm->cudaDev, resolveCudaDevice(comm->options.cudaDev));

  bootstrap::RankInfo mine{};
  mine.rank = comm->rank;
  mine.nranks = comm->nranks;
  mine.pid = static_cast<int32_t>(getpid());
  mine.cudaDev = comm->cudaDev;
  mine.hostHash = hostHash();
  copyString(mine.hostName, sizeof(mine.hostName), hostName());
  copyString(mine.hostId, sizeof(mine.hostId), hostIdentity());
  copyString(mine.busId, sizeof(mine.busId), topo::cudaBusId(comm->cudaDev));
  topo::CpuPlace cpu = topo::cpuPlace();
  mine.package = static_cast<int16_t>(cpu.package);
  mine.numa = static_cast<int16_t>(cpu.numa);
  mine.machineHash = machineHash();
  mine.cores = usableCores();
  mine.onlineCpus = onlineCpus();
  std::string ctasWhy;
  mine.gpuCtas = gpuCtas(comm->cudaDev, static_cast<int>(params::kDeviceThreads.get()), &ctasWhy);
  if (!ctasWhy.empty())
    COLL_LOG(WARN, INIT, "rank {}: CUDA device {}: {}; device launches are not checked for co-residency", comm->rank,
             comm->cudaDev, ctasWhy);

  int64_t entries = std::max<int64_t>(0, std::min<int64_t>(params::kFlightRecorderEntries.get(), 1 << 20));
  // Named by a hash of the id's secret: equal on every rank, and not the secret itself.
  uint64_t commHash = fnv1a(&id.secret, sizeof(id.secret), 0x636f6c6c666c6967ull);
  comm->flight = std::make_unique<FlightRecorder>(comm->rank, comm->nranks, commHash, static_cast<size_t>(entries),
                                                  params::kFlightRecorderDir.get());
  bootstrap::Options bo;
  bo.timeoutMs = comm->options.bootstrapTimeoutMs;
  bo.abort = &comm->abortFlag;
  bo.wait = comm->waitState;
  bo.handshakeMs = std::max<int64_t>(1, params::kHandshakeTimeoutMs.get());
  bo.inboxBytes = static_cast<uint64_t>(std::max<int64_t>(0, params::kBootstrapInboxBytes.get()));
  bo.inboxPeerBytes = static_cast<uint64_t>(std::max<int64_t>(0, params::kBootstrapInboxPeerBytes.get()));
  auto start = std::chrono::steady_clock::now();
  COLL_ASSIGN_OR_RETURN(comm->bootstrap, bootstrap::Bootstrap::create(id, comm->rank, comm->nranks, mine, bo));
  comm->executor = params::kExecutor.get() == "device-host" ? exec::newDeviceHostExecutor(comm->nranks)
                                                            : exec::newCpuExecutor(comm->nranks);
  comm->conns = std::make_unique<Connections>(comm);

  std::set<uint64_t> hosts;
  comm->localRank = 0;
  comm->localSize = 0;
  for (const auto& p : comm->bootstrap->peers()) {
    hosts.insert(p.hostHash);
    if (p.hostHash != mine.hostHash) continue;
    if (p.rank < comm->rank) ++comm->localRank;
    ++comm->localSize;
  }
  comm->nHosts = static_cast<int>(hosts.size());
  comm->corruptResults = faultWanted("corrupt", comm->rank);
  if (!parseCallChecks(params::kCheckCalls.get(), &comm->checkCalls))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_CHECK_CALLS={}: expected 'inband' (the default), 0 or 1"),
                      params::kCheckCalls.get());
  if (std::string proxy = params::kNetProxy.get(); proxy != "auto" && proxy != "thread" && proxy != "waiters")
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("COLL_NET_PROXY={}: expected auto (the default), thread or waiters"), proxy);
  COLL_TRY(setupTuning(comm));
  COLL_TRY(reportTopology(comm));
  // For a live view of the job (coll-top): how this rank reaches the others.
  std::string reach = transportsText(comm);
  comm->waitState->setDetail(reach.empty() ? "no peers" : reach.substr(2));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  COLL_LOG(INFO, INIT, "comm {}{} rank {}/{} local {}/{} hosts {} device {} ready in {} ms", fmt::ptr(comm),
           comm->options.name.empty() ? "" : " " + comm->options.name, comm->rank, comm->nranks, comm->localRank,
           comm->localSize, comm->nHosts, comm->cudaDev < 0 ? std::string("host") : std::to_string(comm->cudaDev), ms);
  return Status::ok();
}

}  // namespace coll
