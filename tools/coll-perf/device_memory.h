// Device buffers for coll-perf --mem device, as nccl-tests allocates them: CUDA runtime memory on
// the rank's GPU and a CUDA stream of its own. coll-perf fills and checks its buffers on the host,
// so this is only what moves them: allocation, whole-buffer copies and stream waits. Builds
// without CUDA get an implementation whose open() says why there is no device.
#pragma once

#include <cstddef>
#include <string>

#include "coll/coll.h"

namespace collperf {

class DeviceMemory {
 public:
  /// Picks the rank's GPU (local rank modulo the visible GPUs, as nccl-tests does with one GPU
  /// per process) and makes a stream on it. False with *why when there is none.
  bool open(int localRank, std::string* why);
  ~DeviceMemory();

  /// Makes this rank's device current on the calling thread (ranks as threads, -t/-g).
  bool makeCurrent(std::string* why);
  /// The device this process uses (after open()), for the header.
  int device() const { return device_; }
  /// The stream the collectives are enqueued on.
  collStream_t stream() const { return stream_; }
  /// Device memory of `bytes`, or nullptr with *why.
  void* alloc(size_t bytes, std::string* why);
  void free(void* p);
  /// Blocking copies between host and device memory.
  bool toDevice(void* dst, const void* src, size_t bytes, std::string* why);
  bool toHost(void* dst, const void* src, size_t bytes, std::string* why);
  /// Waits for everything enqueued on stream(); false with *why when the stream failed.
  bool synchronize(std::string* why);
  /// -G: captures what stream() gets between the two calls into a graph (one at a time), launches
  /// it, destroys it.
  bool beginCapture(std::string* why);
  bool endCapture(std::string* why);
  bool launchGraph(std::string* why);
  void destroyGraph();

 private:
  int device_ = -1;
  collStream_t stream_ = nullptr;
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

}  // namespace collperf
