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

// With --host-stream: waits for what was queued (a failure is reported like a call's).
collResult_t Runner::sync(const Call& c) { return c.stream ? collStreamSynchronize(c.stream) : collSuccess; }

// nccl-tests' Barrier between ranks (-z 1 and 3): a one-element all-reduce, blocking.
collResult_t Runner::barrier() {
  int32_t mine = 0, all = 0;
  return collAllReduce(&mine, &all, 1, collInt32, collSum, comm, nullptr);
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
    for (int k = 0; k < o.check && !failed; ++k) {
      prepare(c, buf, inPlace);
      collResult_t rc = runOnce(c, buf, inPlace);
      if (rc == collSuccess) rc = sync(c);
      if (rc != collSuccess) return fail(rc), m;
      m.wrong += countWrong(c, buf, inPlace);
    }
  }
  for (int k = 0; k < o.warmup && !failed; ++k)
    if (collResult_t rc = iteration(c, inPlace); rc != collSuccess) return fail(rc), m;
  if (collResult_t rc = sync(c); rc != collSuccess) return fail(rc), m;
  const int iters = itersFor(c, inPlace);
  if (iters < 0) return m;
  *itersOut = iters;

  // A per-iteration sample must end when its work has, so -I waits every iteration as -z does.
  const bool waitEach = o.blocking != 0 || o.iterStats;
  std::vector<double> samples(o.iterStats ? iters : 0);
  double waitedUs = 0;  // -z 3: the iterations' own time, without the barriers between them
  double t0 = colltools::nowUs();
  for (int k = 0; k < iters; ++k) {
    double ts = colltools::nowUs();
    collResult_t rc = iteration(c, inPlace);
    if (rc == collSuccess && waitEach) rc = sync(c);
    if (rc != collSuccess) return fail(rc), m;
    double spent = colltools::nowUs() - ts;
    if (o.iterStats) samples[k] = spent / o.aggIters;
    waitedUs += spent;
    if (o.blocking == 1 || o.blocking == 3)
      if (rc = barrier(); rc != collSuccess) return fail(rc), m;
  }
  double issuedUs = colltools::nowUs() - t0;  // -C: until the last call returned, before the final wait
  if (collResult_t rc = sync(c); rc != collSuccess) return fail(rc), m;
  double elapsedUs = colltools::nowUs() - t0;
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
  if (m.wrong >= 0) {
    int64_t w = m.wrong;
    collAllReduce(&w, &m.wrong, 1, collInt64, collSum, comm, nullptr);
  }
  m.algbw = m.timeUs > 0 ? static_cast<double>(c.shape.bytes) / m.timeUs / 1e3 : 0;
  m.busbw = m.algbw * busFactor(o.collective, n);
  return m;
}

}  // namespace collperf
