#include "multiproc/emulated_memory.h"

#include <cstring>

#include "device/runtime.h"

namespace colltest {

EmulatedMemory::EmulatedMemory() {
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
  mem_.stream = static_cast<collStream_t>(s);
  mem_.alloc = [rt](size_t bytes) -> void* {
    void* p = nullptr;
    return rt->alloc(0, bytes, &p).isOk() ? p : nullptr;
  };
  mem_.release = [rt](void* p) { rt->free(p); };
  mem_.copy = [](void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); };
  mem_.sync = [rt, s]() -> std::string {
    coll::Status r = rt->synchronize(s);
    return r.isOk() ? "" : r.message();
  };
}

EmulatedMemory::~EmulatedMemory() {
  if (mem_.stream) (void)coll::device::runtime()->destroyStream(mem_.stream);
}

}  // namespace colltest
