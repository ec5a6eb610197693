// Which device runtime this process uses (runtime.h), decided on first use.
#include "base/log.h"
#include "base/params.h"
#include "device/runtime.h"

namespace coll::device {

Runtime* runtime() {
  static Runtime* chosen = [] {
    int64_t emulate = params::kDeviceEmulation.get();
    if (emulate > 0) {
      COLL_LOG(INFO, INIT, "device runtime: emulated, {} device(s) on CPU threads (COLL_DEVICE_EMULATION)", emulate);
      return &emulatedRuntime(static_cast<int>(emulate));
    }
    return cudaRuntime(nullptr);
  }();
  return chosen;
}

}  // namespace coll::device
