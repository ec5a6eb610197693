// What lets the device executor's code compile twice: by nvcc for the GPU, and as plain C++ for
// CPU threads (the host build CI runs on every commit).
//
// Everything the interpreter needs from the machine goes through this file: the COLL_HD
// qualifier, the memory-ordering wrappers for the FIFO counters and LL lines, a clock, a pause,
// and the thread group that runs one channel (a CTA on the GPU, one thread on the host). The two
// builds differ only here, so the host build is a faithful run of the device logic: the same
// loads and stores in the same order, with ordering that is at least as strong.
//
// Ordering rules (the same as NCCL's primitives): a producer makes a slot's bytes visible before
// the counter that publishes them (release), a consumer reads the counter before the bytes
// (acquire); an LL line carries its flag in the same single store as its data, so it needs no
// fence at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/hd.h"  // COLL_HD, COLL_HD_FN, COLL_NOINLINE, COLL_UNROLL

#include <sched.h>
#include <time.h>

namespace coll::exec::dev {

/// acquire load of a 64-bit counter another agent (thread, process, GPU) stores.
COLL_HD uint64_t loadAcquire(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

/// release store of a 64-bit counter: every write this thread saw before it becomes visible first.
COLL_HD void storeRelease(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/// relaxed store of a 64-bit word another agent loads (atomically): a release store after it
/// publishes it.
COLL_HD void storeRelaxed(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

/// Adds v to a 64-bit counter another agent reads, after every write this thread saw (release,
/// system scope): a one-sided signal raised after its put.
COLL_HD void addRelease(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_fetch_add(p, v, __ATOMIC_RELEASE);
#endif
}

/// A load that is re-done every time (no caching in registers), without ordering.
COLL_HD uint32_t loadVolatile(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
  return *static_cast<const volatile uint32_t*>(p);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

COLL_HD void storeVolatile(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  *static_cast<volatile uint32_t*>(p) = v;
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

/// *p = v if *p == expected; true if it did (the first failure of a channel wins the report).
COLL_HD bool casInt(int32_t* p, int32_t expected, int32_t v) {
#if defined(__CUDA_ARCH__)
  return atomicCAS(reinterpret_cast<int*>(p), expected, v) == expected;
#else
  return __atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
#endif
}

/// Orders this thread's earlier writes before its later ones for every observer (system scope).
COLL_HD void fenceSystem() {
#if defined(__CUDA_ARCH__)
  __threadfence_system();
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/// LL: 8 data bytes travel in 16 bytes, each 4-byte half beside a 4-byte flag. On the GPU the
/// 16 bytes are one vector store (the hardware makes it visible whole); on the host each half
/// and its flag are one 8-byte atomic store. Either way a reader that sees the flag sees its data.
struct alignas(16) LLLine {
  uint32_t data0, flag0, data1, flag1;
};

COLL_HD void storeLL(LLLine* line, uint64_t data, uint32_t flag) {
  uint32_t lo = static_cast<uint32_t>(data), hi = static_cast<uint32_t>(data >> 32);
#if defined(__CUDA_ARCH__)
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(line), "r"(lo), "r"(flag), "r"(hi), "r"(flag)
               : "memory");
#else
  uint64_t* words = reinterpret_cast<uint64_t*>(line);
  __atomic_store_n(&words[0], static_cast<uint64_t>(flag) << 32 | lo, __ATOMIC_RELAXED);
  __atomic_store_n(&words[1], static_cast<uint64_t>(flag) << 32 | hi, __ATOMIC_RELAXED);
#endif
}

/// Reads an LL line: true with its 8 data bytes when both halves carry `flag`.
COLL_HD bool loadLL(const LLLine* line, uint32_t flag, uint64_t* data) {
#if defined(__CUDA_ARCH__)
  uint32_t lo, f0, hi, f1;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(lo), "=r"(f0), "=r"(hi), "=r"(f1)
               : "l"(line)
               : "memory");
  if (f0 != flag || f1 != flag) return false;
#else
  const uint64_t* words = reinterpret_cast<const uint64_t*>(line);
  uint64_t w0 = __atomic_load_n(&words[0], __ATOMIC_RELAXED);
  uint64_t w1 = __atomic_load_n(&words[1], __ATOMIC_RELAXED);
  if (static_cast<uint32_t>(w0 >> 32) != flag || static_cast<uint32_t>(w1 >> 32) != flag) return false;
  uint32_t lo = static_cast<uint32_t>(w0), hi = static_cast<uint32_t>(w1);
#endif
  *data = static_cast<uint64_t>(hi) << 32 | lo;
  return true;
}

/// Nanoseconds of a clock that only moves forward (globaltimer on the GPU).
COLL_HD uint64_t nowNs() {
#if defined(__CUDA_ARCH__)
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
#endif
}

/// A cycle counter for short durations (the SM's clock64 on the GPU; nanoseconds on the host).
COLL_HD uint64_t cycles() {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(clock64());
#else
  return nowNs();
#endif
}

#if !defined(__CUDA_ARCH__)
/// sched_yield(), unless a yield in this process took long lately (in the last 50 ms): then
/// another process holds the cores, each yield would wait out its time slice, and the caller
/// should sleep instead (false). Where only the emulation's threads run, a yield is a hand-off of
/// microseconds and stays the fastest wait.
inline bool cheapYield() {
  static uint64_t slowAt = 0;  // when a yield last took long; racy reads and writes are fine
  uint64_t before = nowNs();
  uint64_t seen = __atomic_load_n(&slowAt, __ATOMIC_RELAXED);
  if (seen != 0 && before - seen < 50 * 1000 * 1000) return false;
  sched_yield();
  uint64_t after = nowNs();
  if (after - before > 1000 * 1000) __atomic_store_n(&slowAt, after, __ATOMIC_RELAXED);
  return true;
}

/// A helper thread's pause between polls (the device proxies): a cheap yield, else a 20 us sleep.
inline void yieldOrNap() {
  if (cheapYield()) return;
  timespec nap{0, 20 * 1000};
  nanosleep(&nap, nullptr);
}
#endif

/// Called between polls of a counter that has not moved; `spins` counts the polls so far.
/// On the host the ranks' CTAs are threads that may outnumber the cores: after a short spin the
/// poller yields for up to 50 us, then sleeps, 1 us doubling to 128 us. Why yields only so long,
/// and only while they are cheap (cheapYield): a thread that yields gets its core back at once
/// where only its peers run (a hand-off takes microseconds), but beside a busy process it waits
/// out that process's whole time slice (milliseconds) at every yield, where a sleeper is woken
/// ahead of it (base/process.h's requestShortSlices makes sure of that). The writer's code is the
/// GPU's (a store, no wake-up call), so the sleep is timed, not a futex wait.
COLL_HD void backoff(uint64_t spins) {
#if defined(__CUDA_ARCH__)
  if (spins > 64) __nanosleep(100);
#else
  static thread_local uint64_t yieldsFrom = 0;  // when this wait's first yield began
  static thread_local uint64_t napsFrom = 0;    // this wait's spin count at its first nap
  if (spins <= 64) return;
  if (spins == 65) {
    yieldsFrom = nowNs();
    napsFrom = 0;
  }
  if (napsFrom == 0) {
    if (nowNs() - yieldsFrom < 50 * 1000 && cheapYield()) return;
    napsFrom = spins;
  }
  uint64_t shift = (spins - napsFrom) / 8;
  timespec nap{0, static_cast<long>(1000ull << (shift < 7 ? shift : 7))};
  nanosleep(&nap, nullptr);
#endif
}

#if defined(__CUDACC__)
/// The threads of one CTA run one channel together.
struct CtaGroup {
  __device__ int tid() const { return threadIdx.x; }
  __device__ int size() const { return blockDim.x; }
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ void sync() const { __syncthreads(); }
  /// sync() that also tells every thread whether any thread passed true.
  __device__ bool syncOr(bool v) const { return __syncthreads_or(v) != 0; }
};
#endif

// The host build's group (several CPU threads play one CTA) is in host_team.h.

}  // namespace coll::exec::dev
