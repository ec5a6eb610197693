// The emulated device runtime (runtime.h): device memory is host memory that the runtime tracks
// (so that isDeviceMemory tells it from the rest), a stream is a thread that runs its items in
// order, an event is a count of recorded and reached points. Testing only.
#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

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

class EmuStream {
 public:
  EmuStream() : worker_([this] { work(); }) {}
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
    if (dev < 0 || dev >= devices_)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("emulated device {} does not exist ({} devices)"), dev,
                        devices_);
    return take(bytes, dev, out);
  }
  void free(void* p) override { give(p); }
  Status allocHost(size_t bytes, void** out) override { return take(bytes, -1, out); }
  void freeHost(void* p) override { give(p); }

  // Emulated kernels are CPU threads: every host address is theirs already.
  Status registerHost(void*, size_t) override { return Status::ok(); }
  void unregisterHost(void*) override {}

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
    st->post(std::move(fn));
    return Status::ok();
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
    auto* s = new EmuStream;
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
    int dev;  // -1: pinned host memory
  };

  Status take(size_t bytes, int dev, void** out) {
    size_t rounded = (std::max<size_t>(bytes, 1) + 255) & ~size_t(255);
    void* p = std::aligned_alloc(256, rounded);
    if (!p) return COLL_ERROR(collSystemError, FMT_STRING("out of memory for {} bytes of emulated memory"), bytes);
    std::memset(p, 0, rounded);
    std::lock_guard<std::mutex> lock(mu_);
    blocks_[reinterpret_cast<uintptr_t>(p)] = {rounded, dev};
    *out = p;
    return Status::ok();
  }

  void give(void* p) {
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks_.erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
  }

  EmuStream* find(Stream s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s) {
      // The default stream, made on first use and kept for the life of the process.
      if (!default_) default_ = new EmuStream;
      return default_;
    }
    auto* st = static_cast<EmuStream*>(s);
    return streams_.count(st) ? st : nullptr;
  }

  const int devices_;
  std::mutex mu_;
  std::map<uintptr_t, Block> blocks_;
  std::set<EmuStream*> streams_;
  EmuStream* default_ = nullptr;
};

}  // namespace

Runtime& emulatedRuntime(int devices) {
  // Never freed: streams and memory may be used by communicators destroyed at exit.
  static Emulated* rt = new Emulated(std::max(devices, 1));
  return *rt;
}

}  // namespace coll::device
