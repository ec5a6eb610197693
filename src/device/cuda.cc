// The CUDA device runtime (runtime.h), over the CUDA runtime API linked statically. Used only
// where topo's driver probe reports devices, so a machine without a driver never calls it.
// Written against the CUDA 13 runtime; compiled in every CUDA build, run only on a GPU machine.
#include <cuda_runtime.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

#include "base/log.h"
#include "base/process.h"
#include "device/cuda_vmm.h"
#include "device/runtime.h"
#include "topo/cuda_probe.h"

namespace coll::device {
namespace {

Status check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return COLL_ERROR(collUnhandledCudaError, FMT_STRING("{} failed: {} ({})"), what, cudaGetErrorString(e),
                    cudaGetErrorName(e));
}

// Allocations may come while the caller's stream captures a graph (a communicator's first call,
// a scratch that grows): CUDA's global capture mode forbids them on this thread then, so they run
// in relaxed mode, as NCCL's allocations do.
class RelaxedCapture {
 public:
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// A graph and its instantiation, for tests and tools.
struct CudaGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

// The user object's destructor: runs on a CUDA thread once the graph is gone.
void CUDART_CB runRelease(void* p) {
  auto* fn = static_cast<std::function<void()>*>(p);
  (*fn)();
  delete fn;
}

class Cuda : public Runtime {
 public:
  const char* name() const override { return "cuda"; }
  bool emulated() const override { return false; }
  int deviceCount() override { return topo::cudaInfo().deviceCount; }

  Status alloc(int dev, size_t bytes, void** out) override {
    blocking_.fetch_add(1, std::memory_order_relaxed);
    RelaxedCapture relaxed;
    DeviceGuard onDevice(*this, dev);
    COLL_TRY(onDevice.status());
    Status s = check(cudaMalloc(out, bytes), "cudaMalloc");
    // Zeroed on a stream of the runtime's own that does not synchronize with the legacy stream,
    // which a capturing stream may not be made to wait for.
    cudaStream_t zero = nullptr;
    if (s.isOk()) s = zeroStream(dev, &zero);
    if (s.isOk()) s = check(cudaMemsetAsync(*out, 0, bytes, zero), "cudaMemsetAsync");
    if (s.isOk()) s = check(cudaStreamSynchronize(zero), "cudaStreamSynchronize");
    return s;
  }
  void free(void* p) override {
    blocking_.fetch_add(1, std::memory_order_relaxed);
    cudaFree(p);
  }

  Status allocShareable(int dev, size_t bytes, void** out) override {
    std::string why;
    if (!vmm::supported(dev, &why)) {
      COLL_LOG(INFO, INIT, "collMemAlloc on device {}: cudaMalloc, not cuMem ({})", dev, why);
      return alloc(dev, bytes, out);
    }
    blocking_.fetch_add(1, std::memory_order_relaxed);
    RelaxedCapture relaxed;
    DeviceGuard onDevice(*this, dev);
    COLL_TRY(onDevice.status());
    return vmm::alloc(dev, bytes, out);
  }
  void freeShareable(void* p) override {
    if (vmm::free(p)) {
      blocking_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    free(p);
  }

  Status newPool(int dev, Pool* out) override {
    RelaxedCapture relaxed;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool = nullptr;
    COLL_TRY(check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate"));
    int no = 0;
    uint64_t keep = ~uint64_t(0);
    Status s = check(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no),
                     "cudaMemPoolSetAttribute(ReuseAllowInternalDependencies)");
    if (s.isOk())
      s = check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                "cudaMemPoolSetAttribute(ReleaseThreshold)");
    if (!s.isOk()) {
      cudaMemPoolDestroy(pool);
      return s;
    }
    *out = pool;
    return Status::ok();
  }
  void destroyPool(Pool p) override {
    if (!p) return;
    blocking_.fetch_add(1, std::memory_order_relaxed);
    cudaMemPoolDestroy(static_cast<cudaMemPool_t>(p));
  }
  void trimPool(Pool p) override {
    if (!p) return;
    blocking_.fetch_add(1, std::memory_order_relaxed);
    cudaMemPoolTrimTo(static_cast<cudaMemPool_t>(p), 0);
  }
  Status allocAsync(Pool pool, size_t bytes, Stream s, void** out) override {
    return check(cudaMallocFromPoolAsync(out, bytes, static_cast<cudaMemPool_t>(pool), static_cast<cudaStream_t>(s)),
                 "cudaMallocFromPoolAsync");
  }
  Status freeAsync(void* p, Stream s) override {
    return check(cudaFreeAsync(p, static_cast<cudaStream_t>(s)), "cudaFreeAsync");
  }
  uint64_t blockingCalls() const override { return blocking_.load(std::memory_order_relaxed); }

  Status allocHost(size_t bytes, void** out) override {
    blocking_.fetch_add(1, std::memory_order_relaxed);  // cudaHostAlloc may wait for the device
    RelaxedCapture relaxed;
    COLL_TRY(check(cudaHostAlloc(out, bytes, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc"));
    std::memset(*out, 0, bytes);
    return Status::ok();
  }
  void freeHost(void* p) override {
    blocking_.fetch_add(1, std::memory_order_relaxed);
    cudaFreeHost(p);
  }

  Status registerHost(void* p, size_t bytes) override {
    RelaxedCapture relaxed;
    COLL_TRY(check(cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable), "cudaHostRegister"));
    void* d = nullptr;
    Status s = check(cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer");
    if (s.isOk() && d != p)
      s = COLL_ERROR(collSystemError,
                     FMT_STRING("the device sees registered host memory {} at another address ({}): host-staged "
                                "connections need a system where it does not"),
                     p, d);
    if (!s.isOk()) cudaHostUnregister(p);
    return s;
  }
  void unregisterHost(void* p) override { cudaHostUnregister(p); }

  Status enablePeerAccess(int dev, int peer) override {
    if (dev == peer) return Status::ok();
    int can = 0;
    COLL_TRY(check(cudaDeviceCanAccessPeer(&can, dev, peer), "cudaDeviceCanAccessPeer"));
    if (!can)
      return COLL_ERROR(collSystemError,
                        FMT_STRING("CUDA device {} cannot access device {} (no peer access between them: "
                                   "COLL_P2P_LEVEL or COLL_P2P_DISABLE=1 stage through host memory)"),
                        dev, peer);
    DeviceGuard onDevice(*this, dev);
    COLL_TRY(onDevice.status());
    cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();  // enabled by an earlier connection: not an error to keep
      e = cudaSuccess;
    }
    return check(e, "cudaDeviceEnablePeerAccess");
  }

  bool allocationOf(const void* p, size_t bytes, void** base, size_t* size) override {
    int dev = -1;
    if (!isDeviceMemory(p, &dev) || !vmm::addressRange(p, base, size)) return false;
    size_t at = static_cast<size_t>(static_cast<const char*>(p) - static_cast<const char*>(*base));
    return at < *size && bytes <= *size - at;
  }

  // VMM allocations (collMemAlloc) cannot go through CUDA IPC: their file descriptor does.
  Status share(void* base, size_t bytes, ShareHandle* out) override {
    out->bytes = bytes;
    out->pid = getpid();
    if (!vmm::owns(base)) return ipcExport(base, bytes, &out->ipc);
    return vmm::exportFd(base, &out->fd);
  }
  void unshare(const ShareHandle& h) override {
    if (h.fd >= 0 && h.pid == getpid()) ::close(h.fd);
  }
  Status openShared(const ShareHandle& h, int dev, void** out) override {
    if (h.fd < 0) return ipcOpen(h.ipc, h.bytes, dev, out);
    std::string why;
    int fd = borrowFd(h.pid, h.fd, &why);
    if (fd < 0) return COLL_ERROR(collSystemError, FMT_STRING("mapping process {}'s device memory: {}"), h.pid, why);
    RelaxedCapture relaxed;
    DeviceGuard onDevice(*this, dev);
    Status s = onDevice.status();
    if (s.isOk()) s = vmm::importFd(fd, h.bytes, dev, out);
    ::close(fd);
    return s;
  }
  void closeShared(void* p) override {
    if (!vmm::free(p)) ipcClose(p);
  }

  Status ipcExport(void* p, size_t, IpcHandle* out) override {
    static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(IpcHandle::bytes), "a CUDA IPC handle fits");
    cudaIpcMemHandle_t h;
    COLL_TRY(check(cudaIpcGetMemHandle(&h, p), "cudaIpcGetMemHandle"));
    std::memset(out->bytes, 0, sizeof(out->bytes));
    std::memcpy(out->bytes, &h, sizeof(h));
    return Status::ok();
  }

  Status ipcOpen(const IpcHandle& in, size_t, int dev, void** out) override {
    cudaIpcMemHandle_t h;
    std::memcpy(&h, in.bytes, sizeof(h));
    DeviceGuard onDevice(*this, dev);
    COLL_TRY(onDevice.status());
    // Lazy peer access: the exporter's memory may be on another GPU of this host.
    return check(cudaIpcOpenMemHandle(out, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
  }
  void ipcClose(void* p) override { cudaIpcCloseMemHandle(p); }

  int currentDevice() override {
    int d = -1;
    if (cudaGetDevice(&d) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return d;
  }
  Status setDevice(int dev) override { return check(cudaSetDevice(dev), "cudaSetDevice"); }

  int multiprocessors(int dev) override {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }
  double cyclesPerNs(int dev) override {
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) != cudaSuccess || khz <= 0) {
      cudaGetLastError();
      return 1.0;
    }
    return khz / 1e6;
  }

  bool isDeviceMemory(const void* p, int* dev) override {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();  // an unregistered pointer is not an error to keep
      return false;
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) return false;
    if (dev) *dev = a.device;
    return true;
  }

  bool isStream(Stream s) override {
    if (!s) return true;
    // cudaStreamQuery is not allowed on a capturing stream (it would end the capture).
    if (captureStatus(s) != cudaStreamCaptureStatusNone) return true;
    RelaxedCapture relaxed;  // as done(): another thread may be capturing
    cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(s));
    if (e == cudaSuccess || e == cudaErrorNotReady) return true;
    cudaGetLastError();
    return false;
  }

  Status copyAsync(void* dst, const void* src, size_t bytes, Stream s) override {
    return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(s)), "cudaMemcpyAsync");
  }

  Status hostTask(Stream, std::function<void()>) override {
    return Status(collInternalError, "hostTask is the emulated device's; CUDA launches kernels");
  }

  Status newEvent(Event* out) override {
    RelaxedCapture relaxed;
    cudaEvent_t e;
    COLL_TRY(check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
    *out = e;
    return Status::ok();
  }
  void destroyEvent(Event e) override { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
  Status record(Event e, Stream s) override {
    return check(cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s)), "cudaEventRecord");
  }
  Status waitEvent(Stream s, Event e) override {
    return check(cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(e), 0),
                 "cudaStreamWaitEvent");
  }
  // Queries and waits come from enqueue(), the proxy thread and a framework's watchdog while
  // another thread may capture a graph in global mode, which such a call would invalidate (the
  // bug PyTorch's NCCL watchdog had): they run in relaxed mode.
  bool done(Event e) override {
    RelaxedCapture relaxed;
    return cudaEventQuery(static_cast<cudaEvent_t>(e)) != cudaErrorNotReady;
  }
  Status waitFor(Event e) override {
    RelaxedCapture relaxed;
    return check(cudaEventSynchronize(static_cast<cudaEvent_t>(e)), "cudaEventSynchronize");
  }

  bool capturing(Stream s) override { return s && captureStatus(s) == cudaStreamCaptureStatusActive; }

  Status retainWhileGraphLives(Stream s, std::function<void()> release) override {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    COLL_TRY(check(cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(s), &st, nullptr, &graph),
                   "cudaStreamGetCaptureInfo"));
    if (st != cudaStreamCaptureStatusActive || !graph)
      return Status(collInternalError, "retainWhileGraphLives: the stream is not capturing");
    auto* fn = new std::function<void()>(std::move(release));
    cudaUserObject_t obj = nullptr;
    Status r =
        check(cudaUserObjectCreate(&obj, fn, runRelease, 1, cudaUserObjectNoDestructorSync), "cudaUserObjectCreate");
    if (!r.isOk()) {
      delete fn;
      return r;
    }
    // The graph takes the only reference: the object dies with the graph (and its instantiations).
    return check(cudaGraphRetainUserObject(graph, obj, 1, cudaGraphUserObjectMove), "cudaGraphRetainUserObject");
  }

  Status beginCapture(Stream s) override {
    // Thread-local: tests capture on several ranks' threads at once (see coll-perf's capture).
    return check(cudaStreamBeginCapture(static_cast<cudaStream_t>(s), cudaStreamCaptureModeThreadLocal),
                 "cudaStreamBeginCapture");
  }
  Status endCapture(Stream s, Graph* out) override {
    auto* g = new CudaGraph;
    Status r = check(cudaStreamEndCapture(static_cast<cudaStream_t>(s), &g->graph), "cudaStreamEndCapture");
    if (r.isOk()) r = check(cudaGraphInstantiate(&g->exec, g->graph, 0), "cudaGraphInstantiate");
    if (!r.isOk()) {
      if (g->graph) cudaGraphDestroy(g->graph);
      delete g;
      return r;
    }
    *out = g;
    return Status::ok();
  }
  Status launchGraph(Graph g, Stream s) override {
    return check(cudaGraphLaunch(static_cast<CudaGraph*>(g)->exec, static_cast<cudaStream_t>(s)), "cudaGraphLaunch");
  }
  void destroyGraph(Graph g) override {
    auto* graph = static_cast<CudaGraph*>(g);
    if (!graph) return;
    cudaGraphExecDestroy(graph->exec);
    cudaGraphDestroy(graph->graph);
    delete graph;
  }

  Status newStream(Stream* out) override {
    cudaStream_t s;
    COLL_TRY(check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    *out = s;
    return Status::ok();
  }
  Status destroyStream(Stream s) override {
    return check(cudaStreamDestroy(static_cast<cudaStream_t>(s)), "cudaStreamDestroy");
  }
  Status synchronize(Stream s) override {
    RelaxedCapture relaxed;
    return check(cudaStreamSynchronize(static_cast<cudaStream_t>(s)), "cudaStreamSynchronize");
  }

 private:
  // Whether s captures (None for a stream that is not a stream: the error is not kept).
  static cudaStreamCaptureStatus captureStatus(Stream s) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(static_cast<cudaStream_t>(s), &st) != cudaSuccess) {
      cudaGetLastError();
      return cudaStreamCaptureStatusNone;
    }
    return st;
  }

  // The stream alloc() zeroes memory of device dev on (the current device): made once, kept.
  Status zeroStream(int dev, cudaStream_t* out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (zeroStreams_.size() <= static_cast<size_t>(dev)) zeroStreams_.resize(static_cast<size_t>(dev) + 1, nullptr);
    cudaStream_t& z = zeroStreams_[static_cast<size_t>(dev)];
    if (!z) {
      COLL_TRY(check(cudaStreamCreateWithFlags(&z, cudaStreamNonBlocking), "cudaStreamCreate"));
    }
    *out = z;
    return Status::ok();
  }

  std::mutex mu_;
  std::vector<cudaStream_t> zeroStreams_;
  std::atomic<uint64_t> blocking_{0};
};

}  // namespace

Runtime* cudaRuntime(std::string* why) {
  const topo::CudaInfo& info = topo::cudaInfo();
  if (info.deviceCount <= 0) {
    if (why) *why = info.why.empty() ? "no CUDA device is usable" : info.why;
    return nullptr;
  }
  static Cuda* rt = new Cuda;  // never freed, like a static: communicators destroyed at exit use it
  return rt;
}

}  // namespace coll::device
