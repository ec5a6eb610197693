#include <cuda_runtime.h>

#include "device_memory.h"

namespace collperf {
namespace {

bool check(cudaError_t e, const char* what, std::string* why) {
  if (e == cudaSuccess) return true;
  *why = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

}  // namespace

bool DeviceMemory::makeCurrent(std::string* why) {
  return check(cudaSetDevice(device_), "--mem device: cudaSetDevice", why);
}

bool DeviceMemory::open(int localRank, std::string* why) {
  int count = 0;
  if (!check(cudaGetDeviceCount(&count), "--mem device: no CUDA device (cudaGetDeviceCount)", why)) return false;
  if (count <= 0) return *why = "--mem device: no CUDA device is visible", false;
  device_ = (localRank < 0 ? 0 : localRank) % count;
  // Before the communicator is made: it takes the current device (collConfig_t.cudaDev unset).
  if (!check(cudaSetDevice(device_), "--mem device: cudaSetDevice", why)) return false;
  cudaStream_t s = nullptr;
  if (!check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "--mem device: cudaStreamCreate", why)) return false;
  stream_ = static_cast<collStream_t>(s);
  return true;
}

DeviceMemory::~DeviceMemory() {
  destroyGraph();
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

bool DeviceMemory::beginCapture(std::string* why) {
  destroyGraph();
  // Thread-local, as nccl-tests does with several threads: in global mode one rank's thread that
  // instantiates its graph (or makes any unsafe call) while another still captures fails, and
  // invalidates that capture.
  return check(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream_), cudaStreamCaptureModeThreadLocal),
               "cudaStreamBeginCapture", why);
}

bool DeviceMemory::endCapture(std::string* why) {
  cudaGraph_t g = nullptr;
  if (!check(cudaStreamEndCapture(static_cast<cudaStream_t>(stream_), &g), "cudaStreamEndCapture", why)) return false;
  graph_ = g;
  cudaGraphExec_t e = nullptr;
  if (!check(cudaGraphInstantiate(&e, g, 0), "cudaGraphInstantiate", why)) return false;
  exec_ = e;
  return true;
}

bool DeviceMemory::launchGraph(std::string* why) {
  return check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream_)),
               "cudaGraphLaunch", why);
}

void DeviceMemory::destroyGraph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = graph_ = nullptr;
}

void* DeviceMemory::alloc(size_t bytes, std::string* why) {
  void* p = nullptr;
  if (!check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc", why)) return nullptr;
  return p;
}

void DeviceMemory::free(void* p) {
  if (p) cudaFree(p);
}

bool DeviceMemory::toDevice(void* dst, const void* src, size_t bytes, std::string* why) {
  return check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device", why);
}

bool DeviceMemory::toHost(void* dst, const void* src, size_t bytes, std::string* why) {
  return check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host", why);
}

bool DeviceMemory::synchronize(std::string* why) {
  return check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize", why);
}

}  // namespace collperf
