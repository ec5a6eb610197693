#include "measure.h"

#include <algorithm>
#include <cstdio>

#include "tools_common.h"

namespace collperf {

collResult_t Runner::iteration(const Call& c, bool inPlace) {
  if (o.aggIters == 1) return runOnce(c, buf, inPlace);
  collResult_t rc = collGroupStart();
  for (int k = 0; k < o.aggIters && rc == collSuccess; ++k) rc = runOnce(c, buf, inPlace);
  collResult_t end = collGroupEnd();
  return rc != collSuccess ? rc : end;
}

// With --host-stream: waits for what was queued (a failure is reported like a call's). With device
// buffers: waits for the stream, then asks the communicator whether its launches failed (a launch
// that failed ends at once, so the wait does not hang on a dead peer).
collResult_t Runner::sync(const Call& c) {
  if (!device) return c.stream ? collStreamSynchronize(c.stream) : collSuccess;
  std::string why;
  if (!device->synchronize(&why)) return failDevice(why), collUnhandledCudaError;
  collResult_t async = collSuccess;
  collResult_t rc = collCommGetAsyncError(comm, &async);
  return rc != collSuccess ? rc : async;
}

// One checked run: inputs written and outputs poisoned (in the host mirrors and copied over, for
// device buffers), the collective, the wait, and the wrong elements counted. False on a failure.
bool Runner::prepareAndRun(const Call& c, bool inPlace, int64_t* wrong) {
  // With device buffers, inputs are written and outputs checked in the host mirror at buf's
  // offsets, and the copies cover each allocation from its start through the largest part a call
  // touches.
  Buffers at = buf;
  size_t bytes = 0;
  if (device) {
    size_t offset = static_cast<size_t>(buf.recv - deviceStart.recv);  // -u's, equal for send and recv
    at = {hostStart.send + offset, hostStart.recv + offset};
    bytes = offset + std::max(c.shape.sendElems, c.shape.recvElems) * colltools::typeBytes(c.type);
  }
  prepare(c, at, inPlace);
  std::string why;
  if (device && (!device->toDevice(deviceStart.send, hostStart.send, bytes, &why) ||
                 !device->toDevice(deviceStart.recv, hostStart.recv, bytes, &why)))
    return failDevice(why), false;
  collResult_t rc = runOnce(c, buf, inPlace);
  if (rc == collSuccess) rc = sync(c);
  if (rc != collSuccess) return fail(rc), false;
  if (device && !device->toHost(hostStart.recv, deviceStart.recv, bytes, &why)) return failDevice(why), false;
  *wrong += countWrong(c, at, inPlace);
  return true;
}

// -G, as nccl-tests does it: the timed loop's iterations captured once into a CUDA graph, the
// graph launched -G times, the time per operation the whole over iterations x launches.
Measure Runner::measureGraph(const Call& c, bool inPlace, int iters, Measure m) {
  std::string why;
  auto failWhy = [&]() { return failDevice("-G: " + why), m; };
  if (!device->beginCapture(&why)) return failWhy();
  collResult_t rc = collSuccess;
  for (int k = 0; k < iters && rc == collSuccess; ++k) rc = iteration(c, inPlace);
  bool ended = device->endCapture(&why);
  if (rc != collSuccess) return fail(rc), m;
  if (!ended) return failWhy();
  double t0 = colltools::nowUs();
  for (int g = 0; g < o.graphs; ++g)
    if (!device->launchGraph(&why)) return failWhy();
  if (rc = sync(c); rc != collSuccess) return fail(rc), m;
  double elapsedUs = colltools::nowUs() - t0;
  device->destroyGraph();
  m.timeUs = colltools::acrossRanks(comm, elapsedUs / iters / o.graphs / o.aggIters, o.average, n);
  return finish(c, m);
}

// nccl-tests' Barrier between ranks (-z 1 and 3): a one-element all-reduce, blocking.
collResult_t Runner::barrier() {
  int32_t mine = 0, all = 0;
  return collAllReduce(&mine, &all, 1, collInt32, collSum, comm, nullptr);
}

// A CUDA call of coll-perf's own failed: printed once, like fail().
void Runner::failDevice(const std::string& why) {
  if (!failed) std::fprintf(stderr, "coll-perf: rank %d: %s\n", rank, why.c_str());
  failed = true;
}

void Runner::fail(collResult_t rc) {
  if (!failed)
    std::fprintf(stderr, "coll-perf: rank %d: %s failed (%s): %s\n", rank, o.collective.c_str(), collGetErrorString(rc),
                 collGetLastError(comm));
  failed = true;
}

// -n, or fewer under --max-seconds. Every rank must run the same number of iterations: decided from
// the slowest rank's time for one. -1 on a failure.
int Runner::itersFor(const Call& c, bool inPlace) {
  if (o.maxSeconds <= 0) return o.iters;
  double t = colltools::nowUs();
  collResult_t rc = iteration(c, inPlace);
  if (rc == collSuccess) rc = sync(c);
  if (rc != collSuccess) return fail(rc), -1;
  double one = colltools::acrossRanks(comm, colltools::nowUs() - t, 3, n);
  return static_cast<int>(std::max(1.0, std::min<double>(o.iters, o.maxSeconds * 1e6 / std::max(one, 0.01))));
}

Measure Runner::measure(const Call& c, bool inPlace, int* itersOut) {
  Measure m;
  *itersOut = 0;
  if (o.check > 0) {
    m.wrong = 0;
    for (int k = 0; k < o.check && !failed; ++k)
      if (!prepareAndRun(c, inPlace, &m.wrong)) return m;
  }
  for (int k = 0; k < o.warmup && !failed; ++k)
    if (collResult_t rc = iteration(c, inPlace); rc != collSuccess) return fail(rc), m;
  if (collResult_t rc = sync(c); rc != collSuccess) return fail(rc), m;
  const int iters = itersFor(c, inPlace);
  if (iters < 0) return m;
  *itersOut = iters;

  if (o.graphs > 0 && device) return measureGraph(c, inPlace, iters, m);
  collDeviceTimings_t dt{};
  if (device) collCommGetDeviceTimings(comm, &dt);  // the count starts with the timed loop

  // A per-iteration sample must end when its work has, so -I waits every iteration as -z does.
  const bool waitEach = o.blocking != 0 || o.iterStats;
  std::vector<double> samples(o.iterStats ? iters : 0);
  double waitedUs = 0;  // -z 3: the iterations' own time, without the barriers between them
  // Each iteration is timed only where a per-iteration figure is reported (-I, -z 3): two clock
  // reads per iteration are a tenth of an 8-byte all-reduce, which MPI's and nccl-tests' loops do
  // not pay either.
  const bool timeEach = o.iterStats || o.blocking == 3;
  double t0 = colltools::nowUs();
  for (int k = 0; k < iters; ++k) {
    double ts = timeEach ? colltools::nowUs() : 0;
    collResult_t rc = iteration(c, inPlace);
    if (rc == collSuccess && waitEach) rc = sync(c);
    if (rc != collSuccess) return fail(rc), m;
    if (timeEach) {
      double spent = colltools::nowUs() - ts;
      if (o.iterStats) samples[k] = spent / o.aggIters;
      waitedUs += spent;
    }
    if (o.blocking == 1 || o.blocking == 3)
      if (rc = barrier(); rc != collSuccess) return fail(rc), m;
  }
  double issuedUs = colltools::nowUs() - t0;  // -C: until the last call returned, before the final wait
  if (collResult_t rc = sync(c); rc != collSuccess) return fail(rc), m;
  double elapsedUs = colltools::nowUs() - t0;
  if (device && collCommGetDeviceTimings(comm, &dt) == collSuccess && dt.launches > 0) {
    double per = 1.0 / static_cast<double>(dt.launches);
    m.hasDevice = true;
    m.launches = static_cast<double>(dt.launches);
    m.channels = static_cast<double>(dt.channels) * per;
    m.kernelUs = dt.kernelUs * per;
    m.firstPieceUs = dt.firstPieceUs * per;
    m.lastPieceUs = dt.lastPieceUs * per;
    m.recvPollUs = dt.recvPollUs * per;
    m.sendPollUs = dt.sendPollUs * per;
    m.fenceUs = (dt.recvFenceUs + dt.sendFenceUs) * per;
  }
  double mine = o.blocking == 3 ? waitedUs : (o.reportCputime ? issuedUs : elapsedUs);
  m.timeUs = colltools::acrossRanks(comm, mine / iters / o.aggIters, o.average, n);
  if (o.iterStats) {
    // Each rank's statistics of its own samples, then combined as the time is (-a). Taking the
    // slowest rank per iteration first gave a min above the mean time: the rank that waits changes
    // from one iteration to the next, so every iteration's maximum holds some rank's wait.
    m.skipped = o.iterSkip;
    std::vector<double> stats =
        packStats(statsOf(std::vector<double>(samples.begin() + std::min(o.iterSkip, iters), samples.end())));
    colltools::acrossRanks(comm, &stats, o.average, n);
    m.stats = unpackStats(stats);
    m.times = samples;
    colltools::acrossRanks(comm, &m.times, o.average, n);
    m.hasStats = true;
  }
  return finish(c, m);
}

// The wrong count summed over ranks, and the bandwidths from the time.
Measure Runner::finish(const Call& c, Measure m) {
  if (m.wrong >= 0) {
    int64_t w = m.wrong;
    collAllReduce(&w, &m.wrong, 1, collInt64, collSum, comm, nullptr);
  }
  m.algbw = m.timeUs > 0 ? static_cast<double>(c.shape.bytes) / m.timeUs / 1e3 : 0;
  m.busbw = m.algbw * busFactor(o.collective, n);
  return m;
}

}  // namespace collperf
