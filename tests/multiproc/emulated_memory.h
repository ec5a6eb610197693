// A rank's memory and stream on the emulated device (COLL_DEVICE_EMULATION), as collcheck's
// runCase takes them: pieces of one allocation of emulated device 0 made at construction
// (arenaMemory: no device allocation between cases), plain copies, one stream.
#pragma once

#include <functional>
#include <string>

#include "multiproc/collcheck.h"

namespace colltest {

class EmulatedMemory {
 public:
  /// Needs COLL_DEVICE_EMULATION set before the first coll call (the runtime is chosen once).
  /// arenaBytes: the most device memory the cases run with it hold at once.
  explicit EmulatedMemory(size_t arenaBytes = size_t(64) << 20);
  ~EmulatedMemory();
  EmulatedMemory(const EmulatedMemory&) = delete;
  EmulatedMemory& operator=(const EmulatedMemory&) = delete;
  /// "" when the emulated runtime is the one in use; else why not (the helpers then do nothing).
  const std::string& error() const { return error_; }
  const Memory& memory() const { return mem_; }
  /// The allocation the memory comes from (tests register it as a window).
  void* arena() const { return arena_; }
  size_t arenaBytes() const { return arenaBytes_; }

 private:
  Memory mem_;
  void* arena_ = nullptr;
  size_t arenaBytes_ = 0;
  std::string error_;
};

/// Runs fn with a stream of the device runtime made for it (the emulated device's, in these
/// tests) and destroyed after: fn's answer, or why the stream could not be made.
std::string withDeviceStream(const std::function<std::string(collStream_t)>& fn);

}  // namespace colltest
