// coll-perf built without CUDA: --mem device is refused with the reason.
#include "device_memory.h"

namespace collperf {

bool DeviceMemory::open(int, std::string* why) {
  *why = "--mem device: this coll-perf was built without CUDA (COLL_ENABLE_CUDA=OFF or no nvcc)";
  return false;
}
DeviceMemory::~DeviceMemory() = default;
bool DeviceMemory::makeCurrent(std::string* why) { return *why = "no device", false; }
void* DeviceMemory::alloc(size_t, std::string* why) { return *why = "no device memory in this build", nullptr; }
void DeviceMemory::free(void*) {}
bool DeviceMemory::toDevice(void*, const void*, size_t, std::string* why) { return *why = "no device", false; }
bool DeviceMemory::toHost(void*, const void*, size_t, std::string* why) { return *why = "no device", false; }
bool DeviceMemory::synchronize(std::string* why) { return *why = "no device", false; }
bool DeviceMemory::beginCapture(std::string* why) { return *why = "no device", false; }
bool DeviceMemory::endCapture(std::string* why) { return *why = "no device", false; }
bool DeviceMemory::launchGraph(std::string* why) { return *why = "no device", false; }
void DeviceMemory::destroyGraph() {}

}  // namespace collperf
