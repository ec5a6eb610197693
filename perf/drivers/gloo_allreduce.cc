// gloo::allreduce (default algorithm) in nccl-tests' all_reduce_perf format (float sum,
// out-of-place) over Gloo's TCP transport on 127.0.0.1 (or $GLOO_HOST), for comparing coll with Gloo on the same
// machine. Usage: gloo_allreduce RANK SIZE STOREDIR [-b -e -f -n -w --max-seconds]; every element checked.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

size_t parseSize(const char* s) {
  char* end;
  double v = std::strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return static_cast<size_t>(v);
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: gloo_allreduce RANK SIZE STOREDIR [-b -e -f -n -w --max-seconds]\n");
    return 2;
  }
  int rank = std::atoi(argv[1]), n = std::atoi(argv[2]);
  std::string storeDir = argv[3];
  size_t minB = 8, maxB = 256 << 20;
  double factor = 2, maxSec = 1.0;
  int iters = 1000, warmup = 10;
  for (int i = 4; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "-b")
      minB = parseSize(argv[i + 1]);
    else if (a == "-e")
      maxB = parseSize(argv[i + 1]);
    else if (a == "-f")
      factor = std::atof(argv[i + 1]);
    else if (a == "-n")
      iters = std::atoi(argv[i + 1]);
    else if (a == "-w")
      warmup = std::atoi(argv[i + 1]);
    else if (a == "--max-seconds")
      maxSec = std::atof(argv[i + 1]);
  }
  // GLOO_HOST: the address this rank's transport binds (a network namespace's own), else loopback.
  const char* host = std::getenv("GLOO_HOST");
  gloo::transport::tcp::attr attr(host && *host ? host : "127.0.0.1");
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore fileStore(storeDir);
  gloo::rendezvous::PrefixStore store("coll_perf_gloo", fileStore);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(std::chrono::seconds(300));
  ctx->connectFullMesh(store, dev);

  auto allreduce = [&](void* in, void* out, size_t count, bool isDouble, bool max) {
    gloo::AllreduceOptions o(ctx);
    using Fn = void (*)(void*, const void*, const void*, size_t);
    if (isDouble) {
      o.setInput(static_cast<double*>(in), count);
      o.setOutput(static_cast<double*>(out), count);
      o.setReduceFunction(max ? static_cast<Fn>(&gloo::max<double>) : static_cast<Fn>(&gloo::sum<double>));
    } else {
      o.setInput(static_cast<float*>(in), count);
      o.setOutput(static_cast<float*>(out), count);
      o.setReduceFunction(static_cast<Fn>(&gloo::sum<float>));
    }
    gloo::allreduce(o);
  };
  std::vector<float> in(maxB / 4 + 1), out(maxB / 4 + 1);
  if (rank == 0) {
    std::printf("# gloo_allreduce (Gloo, tcp transport on 127.0.0.1, gloo::allreduce default algorithm), %d ranks\n",
                n);
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop", "root", "time",
                "algbw", "busbw", "#wrong");
  }
  for (size_t bytes = minB; bytes <= maxB; bytes = static_cast<size_t>(bytes * factor)) {
    size_t count = bytes / 4;
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((static_cast<size_t>(rank) * 7 + i * 13) % 16) - 7;
    std::memset(out.data(), 0xa5, bytes);
    allreduce(in.data(), out.data(), count, false, false);
    double wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += static_cast<float>((static_cast<size_t>(r) * 7 + i * 13) % 16) - 7;
      wrong += out[i] != want;
    }
    for (int i = 0; i < warmup; ++i) allreduce(in.data(), out.data(), count, false, false);
    double t = now();
    allreduce(in.data(), out.data(), count, false, false);
    double one = now() - t, slowest;
    allreduce(&one, &slowest, 1, true, true);
    int it = iters;
    if (slowest * it > maxSec) it = std::max(1, static_cast<int>(maxSec / slowest));
    double t0 = now();
    for (int i = 0; i < it; ++i) allreduce(in.data(), out.data(), count, false, false);
    double mine[2] = {(now() - t0) / it * 1e6, wrong}, sum[2];
    allreduce(mine, sum, 2, true, false);
    double us = sum[0] / n, alg = bytes / us / 1e3;
    if (rank == 0)
      std::printf("  %10zu  %12zu  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f  %6.0f\n", bytes, count, "float", "sum", -1, us,
                  alg, alg * 2.0 * (n - 1) / n, sum[1]);
    if (bytes == maxB) break;
  }
  gloo::BarrierOptions b(ctx);
  gloo::barrier(b);
  return 0;
}
