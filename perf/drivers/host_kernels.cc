// The host reduce kernels' throughput per element type (collSum, out of place), in the bytes the
// membw anchor counts for its sum2 (read a, read b, write c): each type's median over rounds, so
// that a table can set the float8 and float16 loops beside bfloat16/float32 and the memory bound.
//
//   host_kernels ROUNDS MIB     (prints "type GB/s" per round)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/reduce.h"

int main(int argc, char** argv) {
  using coll::kernels::reduce;
  using coll::kernels::typeSize;
  int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  size_t bytes = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 64) << 20;
  // 0x38 bytes: 1.0 in e4m3, 0.5 in e5m2, small normal values in float16/bfloat16/float32.
  std::vector<unsigned char> a(bytes, 0x38), b(bytes, 0x30), c(bytes);
  const char* names[] = {"int8", "uint8",   "int32",  "uint32",   "int64",  "uint64",
                         "half", "float32", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  for (int r = 0; r < rounds; ++r)
    for (int t = 0; t < collNumTypes; ++t) {
      size_t n = bytes / typeSize(static_cast<collDataType_t>(t));
      reduce(c.data(), a.data(), b.data(), n, static_cast<collDataType_t>(t), collSum);  // warm
      auto start = std::chrono::steady_clock::now();
      reduce(c.data(), a.data(), b.data(), n, static_cast<collDataType_t>(t), collSum);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%s %.3f\n", names[t], 3.0 * static_cast<double>(bytes) / s / 1e9);
    }
  return 0;
}
