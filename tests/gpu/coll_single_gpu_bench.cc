// coll on ONE GPU with several ranks in one process, measured exactly as the NCCL yardstick in
// ../shared/anchors/gpu/nccl_single_gpu_bench.cu measures NCCL: one communicator per rank, all on
// device 0 (collCommInitAll), each on its own stream, one thread launching every rank's call in a
// group so that their kernels run concurrently; the same columns, the same busbw factors, and the
// device-to-device copy bandwidth first (the HBM bound). Run by tests/gpu/run_on_device.sh.
//
//   coll_single_gpu_bench -n 4 -b 8 -e 256M -f 4 -i 20 [-c all_reduce|all_gather|reduce_scatter|broadcast] [-t bf16]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "coll/coll.h"

namespace {

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t ce_ = (x);                                                             \
    if (ce_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(ce_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
#define CO(x, comm)                                                                              \
  do {                                                                                           \
    collResult_t cr_ = (x);                                                                      \
    if (cr_ != collSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d coll: %s (%s)\n", __FILE__, __LINE__, collGetErrorString(cr_), \
                   collGetLastError(comm));                                                      \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

size_t parseSize(const char* s) {
  char* end;
  double v = std::strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return static_cast<size_t>(v);
}

// The yardstick's inputs: element i of rank r is (7i + 3r) mod 5 + 1, exact in float.
float value(size_t i, int r) { return static_cast<float>((i * 7 + static_cast<size_t>(r) * 3) % 5 + 1); }

}  // namespace

int main(int argc, char** argv) {
  int n = 2, iters = 20;
  size_t minB = 8, maxB = 256u << 20;
  double factor = 2;
  std::string coll = "all_reduce";
  bool bf16 = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "-n") n = std::atoi(argv[i + 1]);
    if (a == "-b") minB = parseSize(argv[i + 1]);
    if (a == "-e") maxB = parseSize(argv[i + 1]);
    if (a == "-f") factor = std::atof(argv[i + 1]);
    if (a == "-i") iters = std::atoi(argv[i + 1]);
    if (a == "-c") coll = argv[i + 1];
    if (a == "-t") bf16 = std::string(argv[i + 1]) == "bf16";
  }
  int ver = 0;
  collGetVersion(&ver);
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  CK(cudaSetDevice(0));
  std::printf("# coll version %d, device %s, %d ranks on GPU 0 (one process), collective %s\n", ver, prop.name, n,
              coll.c_str());
  {
    size_t B = size_t(1) << 30;
    void *a, *b;
    CK(cudaMalloc(&a, B));
    CK(cudaMalloc(&b, B));
    CK(cudaMemset(a, 1, B));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int w = 0; w < 3; w++) CK(cudaMemcpy(b, a, B, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e0));
    for (int k = 0; k < 10; k++) CK(cudaMemcpyAsync(b, a, B, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf("# d2d copy: %.1f GB/s (read+write)\n", 2.0 * B * 10 / (ms / 1e3) / 1e9);
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  std::vector<collComm_t> comms(n);
  std::vector<int> devs(n, 0);
  CO(collCommInitAll(comms.data(), n, devs.data()), nullptr);
  std::vector<cudaStream_t> st(n);
  for (auto& s : st) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  size_t esz = bf16 ? 2 : 4;
  collDataType_t dt = bf16 ? collBfloat16 : collFloat32;
  std::vector<void*> sb(n), rb(n);
  for (int r = 0; r < n; r++) {
    CK(cudaMalloc(&sb[r], maxB));
    CK(cudaMalloc(&rb[r], maxB));
  }
  std::vector<float> host(maxB / 4);
  bool blocked = coll == "all_gather" || coll == "reduce_scatter";
  // After nccl-tests' columns: host(us), the wall time of enqueueing one iteration (every rank's
  // call, one group), and rank 0's kernels as they measured themselves (collCommGetDeviceTimings,
  // means per launch): the kernel's span, its first and last piece from its start, the waits for
  // data and for free slots, and the release stores, the last three summed over channels.
  std::printf("#%11s %12s %8s %6s %6s %9s %8s %8s %7s %8s %8s %8s %8s %8s %8s %8s %5s\n", "size(B)", "count", "type",
              "redop", "root", "time(us)", "algbw", "busbw", "#wrong", "host(us)", "kern", "first", "last", "rpoll",
              "spoll", "fence", "ch");
  // The sizes minB x factor^k, and maxB last even where the factor steps past it (-f 4 from 8 B
  // would stop at 128 MiB and never measure the 256 MiB it was asked for).
  auto next = [&](size_t b) {
    size_t f = static_cast<size_t>(static_cast<double>(b) * factor);
    f = f > b ? f : b + 1;
    return b < maxB && f > maxB ? maxB : f;
  };
  for (size_t bytes = minB; bytes <= maxB; bytes = next(bytes)) {
    size_t count = bytes / esz;
    if (blocked) count = bytes / esz / n;
    if (count == 0) continue;
    auto launch = [&]() {
      CO(collGroupStart(), nullptr);
      for (int r = 0; r < n; r++) {
        auto s = reinterpret_cast<collStream_t>(st[r]);
        if (coll == "all_reduce")
          CO(collAllReduce(sb[r], rb[r], count, dt, collSum, comms[r], s), comms[r]);
        else if (coll == "all_gather")
          CO(collAllGather(sb[r], rb[r], count, dt, comms[r], s), comms[r]);
        else if (coll == "reduce_scatter")
          CO(collReduceScatter(sb[r], rb[r], count, dt, collSum, comms[r], s), comms[r]);
        else
          CO(collBroadcast(sb[r], rb[r], count, dt, 0, comms[r], s), comms[r]);
      }
      CO(collGroupEnd(), nullptr);
    };
    unsigned long long wrong = 0;
    if (coll == "all_reduce" && !bf16) {
      for (int r = 0; r < n; r++) {
        for (size_t i = 0; i < count; i++) host[i] = value(i, r);
        CK(cudaMemcpy(sb[r], host.data(), count * 4, cudaMemcpyHostToDevice));
      }
      launch();
      for (int r = 0; r < n; r++) CK(cudaStreamSynchronize(st[r]));
      for (int r = 0; r < n; r++) {
        CK(cudaMemcpy(host.data(), rb[r], count * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < count; i++) {
          float want = 0;
          for (int q = 0; q < n; q++) want += value(i, q);
          wrong += host[i] != want;
        }
      }
    }
    for (int w = 0; w < 3; w++) launch();
    for (int r = 0; r < n; r++) CK(cudaStreamSynchronize(st[r]));
    collDeviceTimings_t dt;
    CO(collCommGetDeviceTimings(comms[0], &dt), comms[0]);  // starts the count at the timed loop
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, st[0]));
    for (int r = 1; r < n; r++) CK(cudaStreamWaitEvent(st[r], e0));
    auto h0 = std::chrono::steady_clock::now();
    for (int k = 0; k < iters; k++) launch();
    double hostUs = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count() / iters;
    for (int r = 1; r < n; r++) {
      cudaEvent_t ev;
      CK(cudaEventCreate(&ev));
      CK(cudaEventRecord(ev, st[r]));
      CK(cudaStreamWaitEvent(st[0], ev));
    }
    CK(cudaEventRecord(e1, st[0]));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    double us = ms * 1e3 / iters;
    double algbw = static_cast<double>(count) * esz * (blocked ? n : 1) / us / 1e3;
    double fac =
        coll == "all_reduce" ? 2.0 * (n - 1) / n : (coll == "broadcast" ? 1.0 : static_cast<double>(n - 1) / n);
    CO(collCommGetDeviceTimings(comms[0], &dt), comms[0]);
    double per = dt.launches ? 1.0 / static_cast<double>(dt.launches) : 0.0;
    std::printf("%12zu %12zu %8s %6s %6d %9.2f %8.2f %8.2f %7llu %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %5.1f\n",
                count * esz * (blocked ? n : 1), count, bf16 ? "bfloat16" : "float", "sum",
                coll == "broadcast" ? 0 : -1, us, algbw, algbw * fac, wrong, hostUs, dt.kernelUs * per,
                dt.firstPieceUs * per, dt.lastPieceUs * per, dt.recvPollUs * per, dt.sendPollUs * per,
                (dt.recvFenceUs + dt.sendFenceUs) * per, static_cast<double>(dt.channels) * per);
    std::fflush(stdout);
    if (bytes == maxB) break;
  }
  for (auto c : comms) collCommDestroy(c);
  return 0;
}
