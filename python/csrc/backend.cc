// CollBackend's lifetime, submission, coalescing and splits (the operations: collectives.cc).
#include "backend.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <future>

#include "tagged.h"
#include "work.h"

namespace coll_torch {

namespace {

constexpr const char* kIdKey = "coll/unique_id";

int clampMs(std::chrono::milliseconds t) {
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(t.count(), 1), INT_MAX));
}

// COLL_TORCH_SHUTDOWN_TIMEOUT_MS: how long shutdown() waits for the peers to finalize.
std::chrono::milliseconds shutdownGrace(std::chrono::milliseconds groupTimeout) {
  int64_t ms = 10000;
  if (const char* v = std::getenv("COLL_TORCH_SHUTDOWN_TIMEOUT_MS")) {
    char* end = nullptr;
    long long parsed = std::strtoll(v, &end, 10);
    if (end != v && *end == '\0' && parsed >= 0) ms = parsed;
  }
  return std::min(groupTimeout, std::chrono::milliseconds(ms));
}

std::string sentence(collComm_t comm, collResult_t r) {
  const char* text = collGetLastError(comm);
  return (text && *text) ? text : collGetErrorString(r);
}

}  // namespace

collConfig_t CollBackend::config() const {
  collConfig_t c = COLL_CONFIG_INITIALIZER;
  c.bootstrapTimeoutMs = clampMs(timeout_);
  c.timeoutMs = clampMs(timeout_);
  c.cudaDev = -1;  // host-only unless bound to a device (commFor)
  c.commName = name_.c_str();
  return c;
}

void CollBackend::ownDeadline(Plan& plan, std::chrono::milliseconds timeout) const {
  if (timeout == c10d::kUnsetTimeout) return;
  plan.timeoutMs = clampMs(timeout);
  plan.groupTimeoutMs = clampMs(timeout_);
}

void CollBackend::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lk(mu_);
  timeout_ = timeout;
  // Operations already issued keep theirs (coll takes the deadline when a call is made).
  for (collComm_t c : {comm_.load(), devComm_.load()})
    if (c && collCommSetTimeout(c, clampMs(timeout)) != collSuccess)
      throwError(std::string("coll: set_timeout: ") + collGetLastError(c));
}

CollBackend::CollBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, std::string name, int device)
    : Backend(rank, size), store_(store), timeout_(timeout), name_(std::move(name)) {
  collUniqueId id;
  if (rank == 0) {
    if (collGetUniqueId(&id) != collSuccess)
      throwError(std::string("coll: init: collGetUniqueId failed: ") + collGetLastError(nullptr));
    std::vector<uint8_t> bytes(sizeof(id));
    std::memcpy(bytes.data(), &id, sizeof(id));
    store_->set(kIdKey, bytes);
  } else {
    std::vector<uint8_t> bytes = store_->get(kIdKey);
    if (bytes.size() != sizeof(id))
      throwError("coll: init: the store holds a unique id of " + std::to_string(bytes.size()) + " bytes, not " +
                 std::to_string(sizeof(id)) + " (another program wrote the key " + kIdKey + "?)");
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  collConfig_t cfg = config();
  cfg.cudaDev = device;
  collComm_t comm = nullptr;
  if (collCommInitRankConfig(&comm, size, id, rank, &cfg) != collSuccess)
    throwError(std::string("coll: init of rank ") + std::to_string(rank) + " of " + std::to_string(size) +
               " failed: " + collGetLastError(nullptr));
  adopt(comm, device);
  watcher_ = std::make_unique<Watcher>();
}

CollBackend::CollBackend(collComm_t comm, const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, std::string name, int device)
    : Backend(rank, size),
      store_(store),
      timeout_(timeout),
      name_(std::move(name)),
      watcher_(std::make_unique<Watcher>()) {
  adopt(comm, device);
}

void CollBackend::adopt(collComm_t comm, int device) {
  // send and recv on CPU tensors go through coll's tagged messages (tagged.h): collective, so made
  // here, where every rank of the group takes part.
  if (collCommTaggedInit(comm) != collSuccess) {
    std::string why = collGetLastError(comm);
    collCommAbort(comm);
    throwError("coll: init: send/recv (collCommTaggedInit) failed: " + why);
  }
  comm_ = comm;
  handle_->comm = comm;
  if (device < 0) return;
  // Bound to a device: CUDA tensors use the group's communicator itself.
  device_ = device;
  devComm_ = comm;
  devHandle_->comm = comm;
}

CollBackend::~CollBackend() {
  watcher_.reset();  // completes what is queued (coll's deadlines bound it)
  auto [main, dev] = release();
  if (dev) collCommDestroy(dev);
  if (main) collCommDestroy(main);
}

std::pair<collComm_t, collComm_t> CollBackend::release() {
  collComm_t main = comm_.exchange(nullptr);
  collComm_t dev = devComm_.exchange(nullptr);
  {
    std::lock_guard<std::mutex> lk(handle_->mu);
    handle_->comm = nullptr;
  }
  {
    std::lock_guard<std::mutex> lk(devHandle_->mu);
    devHandle_->comm = nullptr;
  }
  return {main, dev == main ? nullptr : dev};
}

c10::intrusive_ptr<c10d::Backend::Options> CollBackend::getBackendOptions() {
  auto o = c10::make_intrusive<Options>("coll", timeout_);
  o->group_name = name_;
  return o;
}

collComm_t CollBackend::commFor(const c10::Device& device, const char* what, bool collective) {
  collComm_t main = comm_.load();
  if (!main) throwError(std::string("coll: ") + what + ": the process group was aborted or shut down");
  if (!device.is_cuda()) return main;
  const int index = device.has_index() ? device.index() : 0;
  collComm_t dev = devComm_.load();
  if (!dev) {
    if (device_ >= 0 && device_ != index)
      throwError(std::string("coll: ") + what + ": the tensors are on cuda:" + std::to_string(index) +
                 ", but this process group is bound to cuda:" + std::to_string(device_));
    if (!collective)
      throwError(std::string("coll: ") + what +
                 ": this process group is not bound to a CUDA device yet, and a "
                 "send or recv cannot bind it (every rank of the group must take part); pass device_id to "
                 "init_process_group, or run a CUDA collective on the group first");
    // The first CUDA collective: every rank of the group is here, so the device communicator can
    // be split off the group's. The split uses the bootstrap, which queued host work may use.
    watcher_->drain();
    collConfig_t cfg = config();
    cfg.cudaDev = index;
    const std::string name = name_ + ":cuda";
    cfg.commName = name.c_str();
    collComm_t nc = nullptr;
    if (collCommSplit(main, 0, rank_, &nc, &cfg) != collSuccess || !nc)
      throwError(std::string("coll: ") + what + ": making the communicator of cuda:" + std::to_string(index) +
                 " failed: " + collGetLastError(main));
    device_ = index;
    devComm_ = nc;
    std::lock_guard<std::mutex> lk(devHandle_->mu);
    devHandle_->comm = nc;
    dev = nc;
  }
  if (device_ != index)
    throwError(std::string("coll: ") + what + ": the tensors are on cuda:" + std::to_string(index) +
               ", but this process group's CUDA communicator is on cuda:" + std::to_string(device_) +
               " (one device per rank, as with NCCL)");
  int cu = -1;
  if (collCommCuDevice(dev, &cu) != collSuccess)
    throwError(std::string("coll: ") + what +
               ": CUDA tensors need a libcoll built with CUDA whose CUDA runtime "
               "started; this communicator is host-only (" +
               sentence(dev, collInvalidUsage) + ")");
  return dev;
}

collComm_t CollBackend::commFor(at::TensorList tensors, const char* what, bool collective) {
  c10::Device device(c10::kCPU);
  for (const auto& t : tensors)
    if (t.defined()) {
      device = t.device();
      break;
    }
  return commFor(device, what, collective);
}

void CollBackend::eagerConnectSingleDevice(at::Device device) {
  std::lock_guard<std::mutex> lk(mu_);
  if (device.is_cuda()) commFor(device, "init_process_group(device_id)", true);
}

// ---------------------------------------------------------------------------------------------
// Submission

c10::intrusive_ptr<c10d::Work> CollBackend::submit(Plan plan, c10d::OpType type, const char* title,
                                                   const std::vector<at::Tensor>& inputs, bool async, int sourceRank) {
  const c10::Device device = deviceOf(plan, title);
  const auto& handle = device.is_cuda() ? devHandle_ : handle_;
  if (!handle->get()) throwError(std::string("coll: ") + title + ": the process group was aborted or shut down");
  ++seq_;
  std::unique_lock<std::mutex> co(coMu_);
  checkCoalescing(std::strncmp(title, "coll:", 5) == 0 ? title + 5 : title);
  if (coalescing_) {
    if (!batchDevice_) batchDevice_ = device;
    if (*batchDevice_ != device)
      throwError(std::string("coll: ") + title + ": coalesced operations on " + batchDevice_->str() + " and on " +
                 device.str() + " (one batch runs on one device)");
    if (!batchLaunch_) {
      batchLaunch_ = std::make_shared<Launch>("coalesced operations", handle, watcher_->completer());
      batchLaunch_->open();
      watcher_->expireAt(batchLaunch_, std::chrono::steady_clock::now() + timeout_,
                         "coll: the coalesced operations of group " + name_ +
                             " were dropped: end_coalescing did not "
                             "come within the group's timeout of " +
                             std::to_string(timeout_.count()) +
                             " ms (an exception inside torch's coalescing manager?); they did not run");
    }
    batch_.append(std::move(plan));
    batchInputs_.insert(batchInputs_.end(), inputs.begin(), inputs.end());
    return c10::make_intrusive<CollWork>(batchLaunch_, rank_, type, title, inputs, sourceRank);
  }
  co.unlock();
  auto launch = std::make_shared<Launch>(title, handle, watcher_->completer());
  if (device.is_cuda())
    submitDevice(launch, std::move(plan), device, async);
  else
    submitHost(launch, std::move(plan), async);
  return c10::make_intrusive<CollWork>(launch, rank_, type, title, inputs, sourceRank);
}

void CollBackend::submitHost(const std::shared_ptr<Launch>& launch, Plan plan, bool async) {
  // Staging copies read what earlier operations still in flight may write, and copies back
  // still to run write what this one may read: such launches wait for their turn (launch.h).
  const bool defer = watcher_->mustDefer(!plan.before.empty());
  if (defer) {
    // Also without async_op: torch waits on the work of a blocking call, which then blocks.
    launch->defer(std::move(plan));
    watcher_->push(launch, true);
  } else if (async) {
    launch->issue(std::move(plan));
    watcher_->push(launch, false);
  } else {
    launch->runBlocking(std::move(plan));
  }
}

void CollBackend::submitDevice(const std::shared_ptr<Launch>& launch, Plan plan, c10::Device device, bool async) {
  c10::impl::VirtualGuardImpl guard(device.type());
  const c10::Stream current = guard.getStream(device);
  c10::Stream stream = current;
  if (async) {
    // NCCL's backend: async work runs on a stream of its own, after what the current stream has
    // queued so far, so that compute on the current stream overlaps it (DDP's buckets).
    if (!internalStream_) internalStream_ = guard.getStreamFromGlobalPool(device, /*isHighPriority=*/false);
    stream = *internalStream_;
    c10::Event ready(device.type());
    ready.record(current);
    ready.block(stream);
    // The caching allocator must not hand these tensors' memory to anyone else before the
    // internal stream has passed the launch, whatever the caller does with them meanwhile.
    for (const auto& t : plan.keep)
      if (t.defined() && t.has_storage()) guard.recordDataPtrOnStream(t.storage().data_ptr(), stream);
  }
  launch->issueOnStream(std::move(plan), device, stream);
}

// ---------------------------------------------------------------------------------------------
// Coalescing

void CollBackend::dropBatch() {
  coalescing_ = false;
  batchTagged_.clear();
  batch_ = Plan();
  batchDevice_.reset();
  batchLaunch_.reset();
  batchInputs_.clear();
  watcher_->cancelExpiry();
}

void CollBackend::checkCoalescing(const char* what) {
  if (!coalescing_) return;
  if (batchLaunch_ && !batchLaunch_->isOpen()) {
    // Dropped: its deadline passed or someone waited on it (work.wait raised then); the group
    // leaves coalescing so that this and later operations run.
    dropBatch();
    batchDropped_ = "its coalesced operations were dropped before end_coalescing";
    TORCH_WARN("coll: ", what, ": the process group ", name_,
               " was still coalescing, but its batch had been dropped (end_coalescing never came); the group has "
               "left coalescing and this operation runs on its own");
    return;
  }
  if (std::this_thread::get_id() != batchThread_)
    throwError(std::string("coll: ") + what +
               ": another thread of this process is between start_coalescing and "
               "end_coalescing on this process group; an operation from this thread would join its batch (use one "
               "thread per group while coalescing)");
}

void CollBackend::startCoalescing() {
  // Not mu_: torch's abort of a group brackets abort() with start and end_coalescing, also while
  // another thread is blocked in an operation (holding mu_).
  std::lock_guard<std::mutex> co(coMu_);
  if (!comm_.load()) throwError("coll: start_coalescing: the process group was aborted or shut down");
  if (coalescing_) {
    // The previous batch never ended: an exception inside torch's coalescing manager skips
    // end_coalescing. Its operations fail instead of waiting forever.
    const std::string why = "coll: coalesced operations of group " + name_ +
                            " were dropped: start_coalescing came again before end_coalescing (an exception "
                            "inside torch's coalescing manager?); they did not run";
    if (batchLaunch_) batchLaunch_->abandon(why);
    dropBatch();
    TORCH_WARN(why);
  }
  coalescing_ = true;
  batchDropped_.clear();
  batchThread_ = std::this_thread::get_id();
}

c10::intrusive_ptr<c10d::Work> CollBackend::endCoalescing() {
  std::unique_lock<std::mutex> co(coMu_);
  if (!coalescing_) {
    std::string why = batchDropped_.empty() ? "" : " (" + batchDropped_ + ")";
    batchDropped_.clear();
    throwError("coll: end_coalescing without start_coalescing" + why);
  }
  if (batchLaunch_ && !batchLaunch_->isOpen()) {
    dropBatch();
    throwError("coll: end_coalescing: the batch was dropped before it ended (its deadline, the group's timeout of " +
               std::to_string(timeout_.count()) + " ms, passed, or a work of it was waited on); nothing of it ran");
  }
  auto launch = batchLaunch_;
  Plan plan = std::move(batch_);
  auto inputs = std::move(batchInputs_);
  auto tagged = std::move(batchTagged_);
  const std::optional<c10::Device> device = batchDevice_;
  dropBatch();
  co.unlock();
  c10::intrusive_ptr<c10d::Work> work;
  if (launch) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!comm_.load()) throwError("coll: end_coalescing: the process group was aborted or shut down");
    if (device && device->is_cuda())
      submitDevice(launch, std::move(plan), *device, true);
    else
      submitHost(launch, std::move(plan), true);
    work = c10::make_intrusive<CollWork>(launch, rank_, c10d::OpType::COALESCED, "coll:coalesced", inputs);
  }
  // Sends and receives of CPU tensors (batch_isend_irecv) are posted already: the batch's work
  // waits for them, and for its other operations when it had any.
  if (!tagged.empty())
    return c10::make_intrusive<TaggedWork>(std::move(tagged), rank_, c10d::OpType::COALESCED, "coll:coalesced", inputs,
                                           work);
  if (work) return work;
  // Nothing was coalesced: a completed work, which needs no communicator (torch's abort of a
  // group ends its coalescing bracket after abort()).
  launch = std::make_shared<Launch>("coalesced operations", handle_, watcher_->completer());
  launch->runBlocking(Plan());
  return c10::make_intrusive<CollWork>(launch, rank_, c10d::OpType::COALESCED, "coll:coalesced", inputs);
}

// ---------------------------------------------------------------------------------------------
// Splits, lifetime

c10::intrusive_ptr<c10d::Backend> CollBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                     const std::vector<int>& ranks,
                                                     const c10::intrusive_ptr<Options>& opts) {
  std::lock_guard<std::mutex> lk(mu_);  // coll.h: nothing else may use the group during a split
  collComm_t comm = commFor(c10::Device(c10::kCPU), "split", true);
  watcher_->drain();  // the split uses the bootstrap, which queued work may be using to connect
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  const int key = it == ranks.end() ? rank_ : static_cast<int>(it - ranks.begin());
  const int color = it == ranks.end() ? COLL_SPLIT_NOCOLOR : *std::min_element(ranks.begin(), ranks.end());
  const auto timeout = opts ? opts->timeout : timeout_;
  const std::string name = opts && !opts->group_name.empty() ? opts->group_name : name_ + ":split";
  // A group bound to a device at init passes the binding on; a lazily bound one does not.
  const int device = devComm_.load() == comm ? device_ : -1;
  collConfig_t cfg = config();
  cfg.bootstrapTimeoutMs = cfg.timeoutMs = clampMs(timeout);
  cfg.commName = name.c_str();
  cfg.cudaDev = device;
  collComm_t nc = nullptr;
  if (collCommSplit(comm, color, key, &nc, &cfg) != collSuccess)
    throwError(std::string("coll: split: ") + collGetLastError(comm));
  if (!nc) return {};
  return c10::make_intrusive<CollBackend>(nc, store, key, static_cast<int>(ranks.size()), timeout, name, device);
}

void CollBackend::performNocolorSplit() {
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(c10::Device(c10::kCPU), "split", true);
  watcher_->drain();
  collComm_t nc = nullptr;
  collConfig_t cfg = config();
  if (collCommSplit(comm, COLL_SPLIT_NOCOLOR, rank_, &nc, &cfg) != collSuccess)
    throwError(std::string("coll: split: ") + collGetLastError(comm));
}

void CollBackend::waitForPendingWorks() { watcher_->drain(); }

void CollBackend::abort() {
  // Not under mu_: a thread blocked in an operation holds it, and collCommAbort wakes that thread.
  auto [main, dev] = release();
  if (dev) collCommAbort(dev);
  if (main) collCommAbort(main);
}

void CollBackend::shutdown() {
  watcher_->drain();  // this rank's queued work first (bounded by coll's deadlines)
  {
    std::lock_guard<std::mutex> co(coMu_);
    if (coalescing_) {
      if (batchLaunch_) batchLaunch_->abandon("coll: the process group was shut down before end_coalescing");
      dropBatch();
    }
  }
  auto [main, dev] = release();
  if (!main) return;
  // collCommFinalize waits for every peer; a slow or gone one must not hold this rank for the
  // group's whole timeout. It runs on a helper thread; past the grace period the communicators
  // are aborted, which wakes it.
  const auto grace = shutdownGrace(timeout_);
  auto state = std::make_shared<std::pair<collResult_t, std::string>>(collSuccess, "");
  std::promise<void> done;
  auto finished = done.get_future();
  std::thread finalizer([main = main, dev = dev, state, &done] {
    for (collComm_t c : {dev, main}) {
      if (!c) continue;
      collResult_t r = collCommFinalize(c);
      if (r != collSuccess && state->first == collSuccess) *state = {r, sentence(c, r)};
    }
    done.set_value();
  });
  const bool inTime = finished.wait_for(grace) == std::future_status::ready;
  if (inTime && state->first == collSuccess) {
    finalizer.join();
    if (dev) collCommDestroy(dev);
    collCommDestroy(main);
    return;
  }
  if (dev) collCommAbort(dev);
  collCommAbort(main);
  finalizer.join();
  if (!inTime) {
    TORCH_WARN("coll: shutdown of process group ", name_, " (rank ", rank_, "): not every peer finalized within ",
               grace.count(), " ms (COLL_TORCH_SHUTDOWN_TIMEOUT_MS); the communicator was aborted instead");
  } else {
    TORCH_WARN("coll: shutdown of process group ", name_, " (rank ", rank_,
               "): finalize failed, the communicator was aborted instead: ", state->second);
  }
}

}  // namespace coll_torch
