#include "multiproc/emulated_memory.h"

#include <cstring>

#include "device/runtime.h"

namespace colltest {

EmulatedMemory::EmulatedMemory(size_t arenaBytes) {
  coll::device::Runtime* rt = coll::device::runtime();
  if (!rt || !rt->emulated()) {
    error_ = "the emulated device is not in use (set COLL_DEVICE_EMULATION before the first coll call)";
    return;
  }
  coll::device::Stream s = nullptr;
  coll::Status st = rt->newStream(&s);
  if (!st.isOk()) {
    error_ = st.message();
    return;
  }
  mem_.stream = static_cast<collStream_t>(s);  // destroyed with this object, whatever follows fails
  st = rt->alloc(0, arenaBytes, &arena_);
  if (!st.isOk()) {
    error_ = st.message();
    return;
  }
  arenaBytes_ = arenaBytes;
  mem_ = arenaMemory(
      static_cast<char*>(arena_), arenaBytes,
      [](void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }, static_cast<collStream_t>(s),
      [rt, s]() -> std::string {
        coll::Status r = rt->synchronize(s);
        return r.isOk() ? "" : r.message();
      });
}

EmulatedMemory::~EmulatedMemory() {
  if (mem_.stream) (void)coll::device::runtime()->destroyStream(mem_.stream);
  if (arena_) coll::device::runtime()->free(arena_);
}

std::string withDeviceStream(const std::function<std::string(collStream_t)>& fn) {
  coll::device::Stream s = nullptr;
  coll::Status made = coll::device::runtime()->newStream(&s);
  if (!made.isOk()) return made.message();
  std::string e = fn(static_cast<collStream_t>(s));
  (void)coll::device::runtime()->destroyStream(s);
  return e;
}

}  // namespace colltest
