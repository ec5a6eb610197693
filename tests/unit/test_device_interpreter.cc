// The device executor's interpreter (src/exec/cuda/interpreter.h) in its host build: ranks are
// threads of this process, one channel each, over FIFOs in host memory laid out as the device
// sees them (dev_work.h). Every collective and algorithm at 1, 2, 3, 4 and 8 ranks, both slot
// protocols, counts 0, 1, 7 and 1031, in-place and out-of-place, every dtype x op at 3 and 4
// ranks; FIFOs of 4 slots of 64 bytes, so every piece loop wraps the ring many times. Outputs
// are poisoned before each run and compared exactly with the host kernels' result (inputs are
// small integers, so every reduction order gives the same bits). Then the failure paths: a size
// mismatch names the peer, a raised abort flag and a silent peer end the wait.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/catalog.h"
#include "exec/cuda/host_threads.h"
#include "kernels/cpu/reduce.h"

namespace {

using namespace coll;
using algorithms::Algorithm;
using algorithms::Collective;
using exec::dev::DevPort;
using exec::dev::DevResult;
using exec::dev::DevStep;
using exec::dev::DevWork;
using exec::dev::LLLine;

constexpr int kSlots = 4;
constexpr size_t kSlotBytes = 64;
constexpr size_t kLLLines = 4;  // 32 data bytes per LL piece

// One FIFO's memory: counters on lines of their own, as a transport lays them out.
struct FifoMemory {
  alignas(64) uint64_t head = 0;
  uint32_t sizes[kSlots] = {};
  alignas(64) uint64_t tail = 0;
  alignas(64) char slots[kSlots * kSlotBytes] = {};
  LLLine ll[kSlots * kLLLines] = {};
};

// nranks x nranks FIFOs and both ends' ports; cursors persist from one operation to the next.
struct Mesh {
  explicit Mesh(int n) : n(n), mem(n * n), send(n * n), recv(n * n) {
    for (int from = 0; from < n; ++from)
      for (int to = 0; to < n; ++to) {
        FifoMemory& m = mem[from * n + to];
        exec::dev::DevFifo f;
        f.head = &m.head;
        f.sizes = m.sizes;
        f.tail = &m.tail;
        f.slots = m.slots;
        f.llSlots = m.ll;
        f.nslots = kSlots;
        f.slotBytes = kSlotBytes;
        f.llSlotLines = kLLLines;
        send[from * n + to].fifo = f;  // rank from's port to `to`
        send[from * n + to].peer = to;
        recv[to * n + from].fifo = f;  // rank to's port from `from`
        recv[to * n + from].peer = from;
      }
  }
  int n;
  std::vector<FifoMemory> mem;
  std::vector<DevPort> send, recv;
};

struct Case {
  Collective coll;
  Algorithm algo;
  int nranks;
  size_t count;
  collDataType_t type;
  collRedOp_t op;  // collNumOps: PreMulSum with scalar 2
  int proto;
  bool inPlace;
};

bool isInt(collDataType_t t) { return t <= collUint64; }
bool isSigned(collDataType_t t) { return t == collInt8 || t == collInt32 || t == collInt64 || t >= collFloat16; }

// Element i of rank r's input as a small integer, so that any reduction order is exact (float8 e5m2
// included: at most 4 ranks of -2..2, doubled by the PreMulSum case, keep every partial sum exact).
int64_t value(const Case& c, int r, size_t i) {
  if (c.op == collProd) {  // powers of two (and -1): products stay exact in every type
    int64_t v = 1 + static_cast<int64_t>((r + i) % 2);
    return isSigned(c.type) && (r * 3 + i) % 5 == 0 ? -v : v;
  }
  if (c.op >= collBand && c.op <= collBxor) return static_cast<int64_t>((r * 37 + i * 11) & 0x7f);
  int64_t v = static_cast<int64_t>((r * 7 + i * 3) % 5);
  return isSigned(c.type) ? v - 2 : v;
}

void put(void* buf, size_t i, collDataType_t t, int64_t v) {
  size_t s = kernels::typeSize(t);
  char* p = static_cast<char*>(buf) + i * s;
  switch (t) {
    case collFloat16: {
      uint16_t h = kernels::floatToHalf(static_cast<float>(v));
      return std::memcpy(p, &h, 2), void();
    }
    case collBfloat16: {
      uint16_t b = kernels::floatToBfloat16(static_cast<float>(v));
      return std::memcpy(p, &b, 2), void();
    }
    case collFloat32: {
      float f = static_cast<float>(v);
      return std::memcpy(p, &f, 4), void();
    }
    case collFloat64: {
      double d = static_cast<double>(v);
      return std::memcpy(p, &d, 8), void();
    }
    case collFloat8e4m3:
      return static_cast<void>(*p = static_cast<char>(kernels::floatToFloat8e4m3(static_cast<float>(v))));
    case collFloat8e5m2:
      return static_cast<void>(*p = static_cast<char>(kernels::floatToFloat8e5m2(static_cast<float>(v))));
    default:
      std::memcpy(p, &v, s);  // little-endian: the low bytes, wrapped
  }
}

// Elements of input and output per rank for NCCL's count.
size_t inElems(const Case& c) {
  return (c.coll == Collective::kReduceScatter || c.coll == Collective::kAllToAll) ? c.count * c.nranks : c.count;
}
size_t outElems(const Case& c) {
  return (c.coll == Collective::kAllGather || c.coll == Collective::kAllToAll) ? c.count * c.nranks : c.count;
}

// The reduction of every rank's element `at` (of their inputs), with the host kernels.
std::vector<char> reduced(const Case& c, size_t at, size_t n) {
  size_t s = kernels::typeSize(c.type);
  std::vector<char> acc(n * s), x(n * s);
  collRedOp_t op = c.op == collNumOps ? collSum : c.op;
  for (int r = 0; r < c.nranks; ++r) {
    for (size_t i = 0; i < n; ++i) put(x.data(), i, c.type, value(c, r, at + i));
    if (c.op == collNumOps) {
      std::vector<char> two(s);
      put(two.data(), 0, c.type, 2);
      kernels::scale(x.data(), x.data(), n, c.type, two.data());
    }
    if (r == 0)
      acc = x;
    else
      kernels::reduce(acc.data(), acc.data(), x.data(), n, c.type, op);
  }
  if (c.op == collAvg) kernels::finishAverage(acc.data(), n, c.type, c.nranks);
  return acc;
}

std::string name(const Case& c) {
  return std::string(algorithms::collectiveName(c.coll)) + "/" + algorithms::algorithmName(c.algo) +
         " n=" + std::to_string(c.nranks) + " count=" + std::to_string(c.count) + " type=" + std::to_string(c.type) +
         " op=" + std::to_string(c.op) + (c.proto ? " LL" : " Simple") + (c.inPlace ? " in-place" : "");
}

void run(Mesh& mesh, const Case& c) {
  INFO(name(c));
  int n = c.nranks, root = n - 1;
  size_t s = kernels::typeSize(c.type);
  size_t inN = inElems(c), outN = outElems(c);
  // In place as NCCL: the input is the output, or the rank's block of it.
  size_t bufN = std::max(inN, outN);
  std::vector<std::vector<char>> inBuf(n), outBuf(n), scratch(n);
  std::vector<const char*> in(n);
  std::vector<char*> out(n);
  std::vector<std::vector<DevStep>> steps(n);
  std::vector<DevResult> results(n);
  std::vector<DevWork> work(n);
  for (int r = 0; r < n; ++r) {
    outBuf[r].assign(bufN * s + 16, static_cast<char>(0xa5));  // poison
    out[r] = outBuf[r].data();
    if (c.inPlace) {
      size_t offset = c.coll == Collective::kAllGather ? r * c.count : 0;
      in[r] = out[r] + offset * s;
    } else {
      inBuf[r].assign(inN * s + 16, 0);
      in[r] = inBuf[r].data();
    }
    for (size_t i = 0; i < inN; ++i) put(const_cast<char*>(in[r]), i, c.type, value(c, r, i));
    if (c.inPlace && c.coll == Collective::kReduceScatter) out[r] = outBuf[r].data() + r * c.count * s;

    algorithms::ScheduleArgs a;
    a.collective = c.coll;
    a.nranks = n;
    a.rank = r;
    a.count = c.count;
    a.root = root;
    // A ring round's first send takes half the FIFO, as the tuner's chunks do (schedule.h): half
    // of what its pieces hold, each slot keeping room for a call print (dev_work.h).
    size_t fifoBytes =
        kSlots * (c.proto ? (kLLLines - exec::dev::kLLPrintLines) * 8 : kSlotBytes - exec::dev::kPrintBytes);
    a.chunkElems = std::max<size_t>(1, fifoBytes / 2 / s);
    algorithms::Schedule sched = algorithms::buildSchedule(c.algo, a);
    size_t scratchN = 0;
    for (const auto& st : sched)
      if (st.dst == algorithms::Buf::kScratch)
        scratchN = std::max(scratchN, st.dstOff + std::max(st.count, st.recvElems()));
    scratch[r].assign(scratchN * s + 16, static_cast<char>(0x5a));
    steps[r] = exec::dev::toDevSteps(sched);

    DevWork& w = work[r];
    w.steps = steps[r].data();
    w.nsteps = static_cast<int>(steps[r].size());
    w.type = c.type;
    w.op = c.op == collNumOps ? collSum : c.op;
    w.premul = c.op == collNumOps;
    if (w.premul) put(&w.scalar, 0, c.type, 2);
    w.nranks = n;
    w.proto = c.proto;
    w.input = in[r];
    w.output = out[r];
    w.scratch = scratch[r].data();
    w.send = &mesh.send[r * mesh.n];
    w.recv = &mesh.recv[r * mesh.n];
    w.timeoutNs = 20'000'000'000ull;
    w.result = &results[r];
  }
  std::vector<std::thread> threads;
  std::vector<char> ok(n, 0);
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { ok[r] = exec::dev::runChannelOnHost(work[r]); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << exec::dev::describe(results[r], "op"));
    REQUIRE(ok[r]);
  }

  std::vector<char> want(outN * s);
  for (int r = 0; r < n; ++r) {
    if (c.coll == Collective::kReduce && r != root) continue;
    switch (c.coll) {
      case Collective::kAllReduce:
      case Collective::kReduce:
        want = reduced(c, 0, c.count);
        break;
      case Collective::kReduceScatter:
        want = reduced(c, r * c.count, c.count);
        break;
      case Collective::kAllGather:
        for (int k = 0; k < n; ++k)
          for (size_t i = 0; i < c.count; ++i) put(want.data(), k * c.count + i, c.type, value(c, k, i));
        break;
      case Collective::kBroadcast:
        for (size_t i = 0; i < c.count; ++i) put(want.data(), i, c.type, value(c, root, i));
        break;
      case Collective::kAllToAll:
        for (int k = 0; k < n; ++k)
          for (size_t i = 0; i < c.count; ++i) put(want.data(), k * c.count + i, c.type, value(c, k, r * c.count + i));
        break;
    }
    INFO("rank " << r);
    // memcmp with a null pointer is undefined even for 0 bytes (UBSan); count 0 has no output.
    if (outN > 0) REQUIRE(std::memcmp(out[r], want.data(), outN * s) == 0);
  }
}

std::vector<Algorithm> deviceAlgorithms(Collective c) {
  std::vector<Algorithm> out;
  for (Algorithm a : algorithms::algorithmsFor(c))
    if (a != Algorithm::kHier) out.push_back(a);  // hier needs hosts: it is the ring here
  return out;
}

const Collective kCollectives[] = {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                                   Collective::kBroadcast, Collective::kReduce,        Collective::kAllToAll};

}  // namespace

TEST_CASE("device interpreter, host build: every collective and algorithm, 1-8 ranks, both protocols",
          "[device-host]") {
  for (int n : {1, 2, 3, 4, 8}) {
    Mesh mesh(n);  // one mesh per rank count: cursors carry over between operations, as in a comm
    for (int proto : {0, 1})
      for (Collective coll : kCollectives)
        for (Algorithm algo : deviceAlgorithms(coll))
          for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1031)})
            for (bool inPlace : {false, true}) {
              if (inPlace && coll == Collective::kAllToAll) continue;  // NCCL has no in-place all-to-all
              collDataType_t type = count == 7 ? collInt8 : collFloat32;
              run(mesh, Case{coll, algo, n, count, type, collSum, proto, inPlace});
            }
  }
}

TEST_CASE("device interpreter, host build: every dtype x op", "[device-host]") {
  const collDataType_t types[] = {collInt8,    collUint8,   collInt32,   collUint32,   collInt64,      collUint64,
                                  collFloat16, collFloat32, collFloat64, collBfloat16, collFloat8e4m3, collFloat8e5m2};
  const collRedOp_t ops[] = {collSum, collProd, collMax, collMin, collAvg, collBand, collBor, collBxor, collNumOps};
  for (int n : {3, 4}) {
    Mesh mesh(n);
    for (int proto : {0, 1})
      for (collDataType_t type : types)
        for (collRedOp_t op : ops) {
          if (op >= collBand && op <= collBxor && !isInt(type)) continue;
          for (Collective coll : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kReduce})
            for (Algorithm algo : deviceAlgorithms(coll))
              for (bool inPlace : {false, true}) run(mesh, Case{coll, algo, n, 257, type, op, proto, inPlace});
        }
  }
}

TEST_CASE("device interpreter, host build: failures end the wait and name the peer", "[device-host]") {
  // Rank 0 sends 8 floats, rank 1 expects 7: Simple checks the piece's size.
  Mesh mesh(2);
  std::vector<float> a(8, 1.0f), b(8, 0.0f);
  DevStep send{exec::dev::kSend, exec::dev::kInput, exec::dev::kOutput, 0, 1, -1, 0, 0, 8, 8};
  DevStep recv{exec::dev::kRecv, exec::dev::kInput, exec::dev::kOutput, 0, -1, 0, 0, 0, 7, 7};
  DevResult r0, r1;
  DevWork w0, w1;
  for (DevWork* w : {&w0, &w1}) {
    w->nsteps = 1;
    w->type = collFloat32;
    w->op = collSum;
    w->nranks = 2;
    w->input = a.data();
    w->output = b.data();
    w->timeoutNs = 10'000'000'000ull;
  }
  w0.steps = &send;
  w0.send = &mesh.send[0];
  w0.recv = &mesh.recv[0];
  w0.result = &r0;
  w1.steps = &recv;
  w1.send = &mesh.send[2];
  w1.recv = &mesh.recv[2];
  w1.result = &r1;
  REQUIRE(exec::dev::runChannelOnHost(w0));
  REQUIRE_FALSE(exec::dev::runChannelOnHost(w1));
  CHECK(r1.code == DevResult::kSizeMismatch);
  CHECK(r1.peer == 0);
  CHECK(r1.got == 32);
  CHECK(r1.want == 28);
  CHECK(exec::dev::describe(r1, "collAllReduce").find("rank 0 sent a piece of 32 bytes") != std::string::npos);

  // Nobody sends: the abort flag, raised from another thread, ends the wait (both protocols).
  for (int proto : {0, 1}) {
    Mesh m(2);
    uint32_t abortFlag = 0;
    DevResult r;
    DevWork w = w1;
    w.proto = proto;
    w.send = &m.send[2];
    w.recv = &m.recv[2];
    w.abortFlag = &abortFlag;
    w.result = &r;
    std::thread raiser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      __atomic_store_n(&abortFlag, 1u, __ATOMIC_RELAXED);
    });
    auto start = std::chrono::steady_clock::now();
    bool ok = exec::dev::runChannelOnHost(w);
    raiser.join();
    CHECK_FALSE(ok);
    CHECK(r.code == DevResult::kAborted);
    CHECK(r.peer == 0);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  }

  // Nobody sends and nobody aborts: the timeout ends the wait.
  {
    Mesh m(2);
    DevResult r;
    DevWork w = w1;
    w.send = &m.send[2];
    w.recv = &m.recv[2];
    w.timeoutNs = 100'000'000ull;
    w.result = &r;
    CHECK_FALSE(exec::dev::runChannelOnHost(w));
    CHECK(r.code == DevResult::kTimeout);
    CHECK(r.peer == 0);
  }

  // LL over a connection without an LL region (a network FIFO): the step fails, naming the peer,
  // instead of writing through a null region.
  {
    Mesh m(2);
    m.send[1].fifo.llSlots = nullptr;  // rank 0's port to rank 1
    DevResult r;
    DevWork w = w0;
    w.proto = 1;
    w.send = &m.send[0];
    w.recv = &m.recv[0];
    w.result = &r;
    CHECK_FALSE(exec::dev::runChannelOnHost(w));
    CHECK(r.code == DevResult::kBadStep);
    CHECK(r.peer == 1);
  }
}
