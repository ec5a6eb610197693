// A rank's memory and stream on the emulated device (COLL_DEVICE_EMULATION), as collcheck's
// runCase takes them: device allocations of emulated device 0, plain copies, one stream.
#pragma once

#include "multiproc/collcheck.h"

namespace colltest {

class EmulatedMemory {
 public:
  /// Needs COLL_DEVICE_EMULATION set before the first coll call (the runtime is chosen once).
  EmulatedMemory();
  ~EmulatedMemory();
  EmulatedMemory(const EmulatedMemory&) = delete;
  EmulatedMemory& operator=(const EmulatedMemory&) = delete;
  /// "" when the emulated runtime is the one in use; else why not (the helpers then do nothing).
  const std::string& error() const { return error_; }
  const Memory& memory() const { return mem_; }

 private:
  Memory mem_;
  std::string error_;
};

}  // namespace colltest
