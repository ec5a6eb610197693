// The emulated device runtime (runtime.h): device memory is host memory that the runtime tracks
// (so that isDeviceMemory tells it from the rest), a stream is a thread that runs its items in
// order, an event is a count of recorded and reached points. Testing only.
//
// Device memory is a memfd mapping, so that CUDA IPC has a faithful stand-in: a handle is the
// exporter's pid and descriptor, and another process of the same user opens
// /proc/<pid>/fd/<fd> and maps the same pages, as cudaIpcOpenMemHandle maps the same device
// memory. The memory lives while any mapping does; nothing is named in /dev/shm.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/params.h"
#include "base/process.h"
#include "device/runtime.h"

namespace coll::device {
namespace {

// An event: points recorded, and the last point a stream reached.
struct EventState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;
  uint64_t reached = 0;
};

struct EventHandle {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

// A captured graph: the items enqueued while its stream captured, posted again at each launch,
// and what runs when it is destroyed.
struct EmuGraph {
  std::vector<std::function<void()>> items;
  std::vector<std::function<void()>> releases;
};

// The calling thread's current emulated device (cudaSetDevice's state is per thread too).
thread_local int tCurrentDevice = 0;

class EmuStream {
 public:
  explicit EmuStream(int device)
      : dev(device), worker_([this] {
          requestShortSlices();  // base/process.h: it hands work to and from the ranks' threads
          work();
        }) {}
  const int dev;  // the device current when it was made; -1: the default stream (every device's)
  ~EmuStream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }
  void drain() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return items_.empty() && !busy_; });
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !items_.empty(); });
      if (items_.empty()) return;  // stopping, and nothing left
      std::function<void()> fn = std::move(items_.front());
      items_.pop_front();
      busy_ = true;
      lock.unlock();
      fn();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> items_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;
};

class Emulated : public Runtime {
 public:
  explicit Emulated(int devices) : devices_(devices) {}
  const char* name() const override { return "emulated"; }
  bool emulated() const override { return true; }
  int deviceCount() override { return devices_; }

  Status alloc(int dev, size_t bytes, void** out) override {
    COLL_TRY(checkDevice(dev));
    blocking_.fetch_add(1, std::memory_order_relaxed);
    return take(bytes, dev, out);
  }
  void free(void* p) override {
    blocking_.fetch_add(1, std::memory_order_relaxed);
    give(p);
  }
  // A pool is its device's number plus one (never null); its memory comes from the device's.
  Status newPool(int dev, Pool* out) override {
    COLL_TRY(checkDevice(dev));
    *out = reinterpret_cast<Pool>(static_cast<intptr_t>(dev) + 1);
    return Status::ok();
  }
  void destroyPool(Pool) override { blocking_.fetch_add(1, std::memory_order_relaxed); }
  // The emulated pool holds nothing back: allocAsync and freeAsync allocate and free at once.
  void trimPool(Pool) override { blocking_.fetch_add(1, std::memory_order_relaxed); }
  Status allocAsync(Pool pool, size_t bytes, Stream s, void** out) override {
    int dev = static_cast<int>(reinterpret_cast<intptr_t>(pool)) - 1;
    COLL_TRY(checkDevice(dev));
    if (!find(s)) return Status(collInvalidArgument, "allocAsync: not a live stream of the emulated device");
    return take(bytes, dev, out);  // usable at once, so by whatever s runs later too
  }
  Status freeAsync(void* p, Stream s) override {
    return hostTask(s, [this, p] { give(p); });  // after what s has before it
  }
  uint64_t blockingCalls() const override { return blocking_.load(std::memory_order_relaxed); }
  Status allocHost(size_t bytes, void** out) override {
    blocking_.fetch_add(1, std::memory_order_relaxed);  // as cudaHostAlloc: counted
    return take(bytes, -1, out);
  }
  void freeHost(void* p) override {
    blocking_.fetch_add(1, std::memory_order_relaxed);
    give(p);
  }

  int currentDevice() override { return tCurrentDevice; }
  Status setDevice(int dev) override {
    COLL_TRY(checkDevice(dev));
    tCurrentDevice = dev;
    return Status::ok();
  }

  int multiprocessors(int) override {
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(params::kDeviceEmulationSms.get(), 1 << 16)));
  }
  double cyclesPerNs(int) override { return 1.0; }  // the host build counts nanoseconds

  // Emulated kernels are CPU threads: every host address is theirs already.
  Status registerHost(void*, size_t) override { return Status::ok(); }
  void unregisterHost(void*) override {}
  Status enablePeerAccess(int, int) override { return Status::ok(); }

  bool allocationOf(const void* p, size_t bytes, void** base, size_t* size) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.upper_bound(reinterpret_cast<uintptr_t>(p));  // the block before may hold p
    if (it == blocks_.begin()) return false;
    --it;
    const Block& b = it->second;
    uintptr_t at = reinterpret_cast<uintptr_t>(p);
    if (b.fd < 0 || b.imported || at - it->first >= b.bytes || bytes > b.bytes - (at - it->first)) return false;
    *base = reinterpret_cast<void*>(it->first);
    *size = b.bytes;
    return true;
  }

  Status ipcExport(void* p, size_t bytes, IpcHandle* out) override {
    EmuIpc h{};
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
      if (it == blocks_.end() || it->second.fd < 0 || bytes > it->second.bytes)
        return COLL_ERROR(collInternalError, FMT_STRING("ipcExport: {} is not the start of {} bytes of device memory"),
                          p, bytes);
      h.fd = it->second.fd;
    }
    h.magic = kIpcMagic;
    h.pid = getpid();
    h.bytes = bytes;
    std::memset(out->bytes, 0, sizeof(out->bytes));
    std::memcpy(out->bytes, &h, sizeof(h));
    return Status::ok();
  }

  Status ipcOpen(const IpcHandle& in, size_t bytes, int dev, void** out) override {
    EmuIpc h;
    std::memcpy(&h, in.bytes, sizeof(h));
    if (h.magic != kIpcMagic || h.bytes < bytes || dev < 0 || dev >= devices_)
      return COLL_ERROR(collInternalError, FMT_STRING("ipcOpen: not an emulated IPC handle for {} bytes"), bytes);
    std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
      return COLL_ERROR(collSystemError, FMT_STRING("ipcOpen: cannot open {} (process {} gone?): {}"), path, h.pid,
                        std::strerror(errno));
    struct stat st {};
    void* p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= bytes)
      p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);  // the mapping keeps the memory
    if (p == MAP_FAILED)
      return COLL_ERROR(collSystemError, FMT_STRING("ipcOpen: mapping {} bytes of {} failed"), bytes, path);
    std::lock_guard<std::mutex> lock(mu_);
    blocks_[reinterpret_cast<uintptr_t>(p)] = {bytes, dev, -1, true};
    *out = p;
    return Status::ok();
  }

  void ipcClose(void* p) override {
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
      if (it == blocks_.end() || !it->second.imported) return;
      bytes = it->second.bytes;
      blocks_.erase(it);
    }
    munmap(p, bytes);
  }

  bool isDeviceMemory(const void* p, int* dev) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto a = reinterpret_cast<uintptr_t>(p);
    auto it = blocks_.upper_bound(a);
    if (it == blocks_.begin()) return false;
    --it;
    if (a >= it->first + it->second.bytes || it->second.dev < 0) return false;
    if (dev) *dev = it->second.dev;
    return true;
  }

  bool isStream(Stream s) override {
    std::lock_guard<std::mutex> lock(mu_);
    return s == nullptr || streams_.count(static_cast<EmuStream*>(s)) != 0;
  }

  Status copyAsync(void* dst, const void* src, size_t bytes, Stream s) override {
    return hostTask(s, [=] { std::memmove(dst, src, bytes); });
  }

  Status hostTask(Stream s, std::function<void()> fn) override {
    EmuStream* st = find(s);
    if (!st) return Status(collInvalidArgument, "not a live stream of the emulated device");
    // As CUDA refuses a launch or a record on a stream of a device that is not current.
    if (st->dev >= 0 && st->dev != tCurrentDevice)
      return COLL_ERROR(collUnhandledCudaError,
                        FMT_STRING("work for a stream of emulated device {} was enqueued while device {} is current "
                                   "(CUDA refuses a launch there: cudaSetDevice first)"),
                        st->dev, tCurrentDevice);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = capturing_.find(st);
      if (it != capturing_.end()) {  // captured: runs at each launch of the graph
        it->second->items.push_back(std::move(fn));
        return Status::ok();
      }
    }
    st->post(std::move(fn));
    return Status::ok();
  }

  bool capturing(Stream s) override {
    EmuStream* st = find(s);
    std::lock_guard<std::mutex> lock(mu_);
    return st && capturing_.count(st) != 0;
  }

  Status retainWhileGraphLives(Stream s, std::function<void()> release) override {
    EmuStream* st = find(s);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = st ? capturing_.find(st) : capturing_.end();
    if (it == capturing_.end()) return Status(collInternalError, "retainWhileGraphLives: the stream is not capturing");
    it->second->releases.push_back(std::move(release));
    return Status::ok();
  }

  Status beginCapture(Stream s) override {
    EmuStream* st = find(s);
    if (!st || !s) return Status(collInvalidArgument, "capture needs a live stream other than the default one");
    std::lock_guard<std::mutex> lock(mu_);
    if (!capturing_.emplace(st, new EmuGraph).second)
      return Status(collInvalidUsage, "the stream is capturing already");
    return Status::ok();
  }

  Status endCapture(Stream s, Graph* out) override {
    EmuStream* st = find(s);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = st ? capturing_.find(st) : capturing_.end();
    if (it == capturing_.end()) return Status(collInvalidUsage, "the stream is not capturing");
    *out = it->second;
    capturing_.erase(it);
    return Status::ok();
  }

  Status launchGraph(Graph g, Stream s) override {
    auto* graph = static_cast<EmuGraph*>(g);
    if (!graph) return Status(collInvalidArgument, "no graph");
    for (const auto& item : graph->items) COLL_TRY(hostTask(s, item));
    return Status::ok();
  }

  void destroyGraph(Graph g) override {
    auto* graph = static_cast<EmuGraph*>(g);
    if (!graph) return;
    for (auto& r : graph->releases) r();
    delete graph;
  }

  Status newEvent(Event* out) override {
    *out = new EventHandle;
    return Status::ok();
  }
  void destroyEvent(Event e) override { delete static_cast<EventHandle*>(e); }

  Status record(Event e, Stream s) override {
    std::shared_ptr<EventState> st = static_cast<EventHandle*>(e)->state;
    uint64_t point;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      point = ++st->recorded;
    }
    return hostTask(s, [st, point] {
      std::lock_guard<std::mutex> lock(st->mu);
      st->reached = std::max(st->reached, point);
      st->cv.notify_all();
    });
  }

  Status waitEvent(Stream s, Event e) override {
    std::shared_ptr<EventState> st = static_cast<EventHandle*>(e)->state;
    uint64_t point;
    {
      std::lock_guard<std::mutex> lock(st->mu);
      point = st->recorded;
    }
    return hostTask(s, [st, point] {
      std::unique_lock<std::mutex> lock(st->mu);
      st->cv.wait(lock, [&] { return st->reached >= point; });
    });
  }

  bool done(Event e) override {
    EventState& st = *static_cast<EventHandle*>(e)->state;
    std::lock_guard<std::mutex> lock(st.mu);
    return st.reached >= st.recorded;
  }

  Status waitFor(Event e) override {
    EventState& st = *static_cast<EventHandle*>(e)->state;
    std::unique_lock<std::mutex> lock(st.mu);
    st.cv.wait(lock, [&] { return st.reached >= st.recorded; });
    return Status::ok();
  }

  Status newStream(Stream* out) override {
    auto* s = new EmuStream(tCurrentDevice);
    std::lock_guard<std::mutex> lock(mu_);
    streams_.insert(s);
    *out = s;
    return Status::ok();
  }

  Status destroyStream(Stream s) override {
    auto* st = static_cast<EmuStream*>(s);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!st || streams_.erase(st) == 0) return Status(collInvalidArgument, "not a stream of the emulated device");
    }
    delete st;  // runs what is queued, then stops
    return Status::ok();
  }

  Status synchronize(Stream s) override {
    EmuStream* st = find(s);
    if (!st) return Status(collInvalidArgument, "not a live stream of the emulated device");
    st->drain();
    return Status::ok();
  }

 private:
  struct Block {
    size_t bytes;
    int dev;                // -1: pinned host memory
    int fd = -1;            // device memory: its memfd (kept open for ipcExport)
    bool imported = false;  // another process's memory, mapped by ipcOpen
  };

  // An IPC handle of the emulation.
  static constexpr uint32_t kIpcMagic = 0x656d7549;  // "Iume"
  struct EmuIpc {
    uint32_t magic;
    int32_t pid;
    int32_t fd;
    uint64_t bytes;
  };
  static_assert(sizeof(EmuIpc) <= sizeof(IpcHandle::bytes), "an emulated IPC handle fits");

  Status checkDevice(int dev) const {
    if (dev >= 0 && dev < devices_) return Status::ok();
    return COLL_ERROR(collInvalidArgument, FMT_STRING("emulated device {} does not exist ({} devices)"), dev, devices_);
  }

  Status take(size_t bytes, int dev, void** out) {
    size_t rounded = (std::max<size_t>(bytes, 1) + 255) & ~size_t(255);
    Block b{rounded, dev};
    void* p = nullptr;
    if (dev >= 0) {
      // Device memory: shareable pages (ipcExport), zero from the kernel, page-aligned.
      b.fd = memfd_create("coll-emulated-device", MFD_CLOEXEC);
      if (b.fd < 0 || ftruncate(b.fd, static_cast<off_t>(rounded)) != 0) {
        int err = errno;
        if (b.fd >= 0) ::close(b.fd);
        return COLL_ERROR(collSystemError, FMT_STRING("emulated device memory of {} bytes: {}"), bytes,
                          std::strerror(err));
      }
      p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd, 0);
      if (p == MAP_FAILED) {
        ::close(b.fd);
        return COLL_ERROR(collSystemError, FMT_STRING("mapping {} bytes of emulated device memory failed"), bytes);
      }
    } else {
      p = std::aligned_alloc(256, rounded);
      if (!p) return COLL_ERROR(collSystemError, FMT_STRING("out of memory for {} bytes of emulated memory"), bytes);
      std::memset(p, 0, rounded);
    }
    std::lock_guard<std::mutex> lock(mu_);
    blocks_[reinterpret_cast<uintptr_t>(p)] = b;
    *out = p;
    return Status::ok();
  }

  void give(void* p) {
    if (!p) return;
    Block b{0, -1};
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
      if (it == blocks_.end() || it->second.imported) return;  // not ours to free (ipcClose)
      b = it->second;
      blocks_.erase(it);
    }
    if (b.fd >= 0) {
      munmap(p, b.bytes);
      ::close(b.fd);
    } else {
      std::free(p);
    }
  }

  EmuStream* find(Stream s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s) {
      // The default stream, made on first use and kept for the life of the process.
      if (!default_) default_ = new EmuStream(-1);
      return default_;
    }
    auto* st = static_cast<EmuStream*>(s);
    return streams_.count(st) ? st : nullptr;
  }

  const int devices_;
  std::atomic<uint64_t> blocking_{0};
  std::mutex mu_;
  std::map<uintptr_t, Block> blocks_;
  std::set<EmuStream*> streams_;
  EmuStream* default_ = nullptr;
  std::map<EmuStream*, EmuGraph*> capturing_;
};

}  // namespace

Runtime& emulatedRuntime(int devices) {
  // Never freed: streams and memory may be used by communicators destroyed at exit.
  static Emulated* rt = new Emulated(std::max(devices, 1));
  return *rt;
}

}  // namespace coll::device
