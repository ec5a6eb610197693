// The C API's contract on one process: argument checking, error strings, last error, the
// not-yet-available data path, lifecycle misuse.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "coll/coll.h"
#include "multiproc/checks.h"
#include "topo/cuda_probe.h"

namespace {
collComm_t singleRank() {
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  collComm_t comm = nullptr;
  REQUIRE(collCommInitRank(&comm, 1, id, 0) == collSuccess);
  REQUIRE(comm != nullptr);
  return comm;
}
}  // namespace

TEST_CASE("version and error strings", "[api]") {
  int v = 0;
  CHECK(collGetVersion(&v) == collSuccess);
  CHECK(v == COLL_VERSION_CODE);
  CHECK(collGetVersion(nullptr) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("collGetVersion: version is NULL"));
  for (int r = 0; r < collNumResults; ++r) CHECK(std::strlen(collGetErrorString(static_cast<collResult_t>(r))) > 0);
  CHECK(std::string(collGetErrorString(static_cast<collResult_t>(99))) == "unknown result code");
  CHECK(std::string(collGetErrorString(collTimeout)) == "operation timed out");
}

TEST_CASE("enums carry NCCL's values", "[api]") {
  CHECK(collInvalidUsage == 5);
  CHECK(collInProgress == 7);
  CHECK(collFloat32 == 7);
  CHECK(collBfloat16 == 9);
  CHECK(collAvg == 4);
  CHECK(COLL_SPLIT_NOCOLOR == -1);
  CHECK(sizeof(collUniqueId) == 128);
}

TEST_CASE("init rejects bad arguments without touching the output", "[api]") {
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  collComm_t comm = reinterpret_cast<collComm_t>(0x1234);
  CHECK(collCommInitRank(nullptr, 1, id, 0) == collInvalidArgument);
  CHECK(collCommInitRank(&comm, 0, id, 0) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("nranks=0"));
  CHECK(collCommInitRank(&comm, 2, id, 2) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("rank=2 is not in [0, 2)"));
  collUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  CHECK(collCommInitRank(&comm, 1, zero, 0) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("collUniqueId"));

  collConfig_t bad = COLL_CONFIG_INITIALIZER;
  bad.magic = 0;
  CHECK(collCommInitRankConfig(&comm, 1, id, 0, &bad) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("COLL_CONFIG_INITIALIZER"));
  collConfig_t badBlocking = COLL_CONFIG_INITIALIZER;
  badBlocking.blocking = 5;
  CHECK(collCommInitRankConfig(&comm, 1, id, 0, &badBlocking) == collInvalidArgument);
  collConfig_t badTimeout = COLL_CONFIG_INITIALIZER;
  badTimeout.timeoutMs = -5;
  CHECK(collCommInitRankConfig(&comm, 1, id, 0, &badTimeout) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("timeoutMs=-5"));
  CHECK(comm == reinterpret_cast<collComm_t>(0x1234));
  CHECK(collGetUniqueId(nullptr) == collInvalidArgument);
}

// config.timeoutMs = 0: no data-path deadline (what the NCCL drop-in asks for, as NCCL has none).
TEST_CASE("a communicator with no data-path deadline", "[api]") {
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.timeoutMs = 0;
  collComm_t comm = nullptr;
  REQUIRE(collCommInitRankConfig(&comm, 1, id, 0, &cfg) == collSuccess);
  float x[3] = {1, 2, 3};
  CHECK(collAllReduce(x, x, 3, collFloat32, collSum, comm, nullptr) == collSuccess);
  CHECK(x[2] == 3.0f);
  CHECK(collCommDestroy(comm) == collSuccess);
}

TEST_CASE("parameters through the C API", "[api][param]") {
  const char* v = nullptr;
  int set = -1;
  REQUIRE(collParamGet("TIMEOUT_MS", &v, &set) == collSuccess);
  CHECK(std::string(v) == "300000");
  CHECK(set == 0);
  setenv("COLL_BUFFSIZE", "2097152", 1);
  REQUIRE(collParamGet("COLL_BUFFSIZE", &v, &set) == collSuccess);
  CHECK(std::string(v) == "2097152");
  CHECK(set == 1);
  unsetenv("COLL_BUFFSIZE");
  CHECK(collParamGet("COLL_NOT_A_PARAMETER", &v, &set) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("COLL_NOT_A_PARAMETER"));
  const char* const* names = nullptr;
  int n = 0;
  REQUIRE(collParamNames(&names, &n) == collSuccess);
  REQUIRE(n > 10);
  bool found = false;
  for (int i = 0; i < n; ++i) found = found || std::string(names[i]) == "COLL_TIMEOUT_MS";
  CHECK(found);
  CHECK(collParamNcclTwins(2) == collInvalidArgument);
  int devices = -1;
  REQUIRE(collGetDeviceCount(&devices) == collSuccess);
  CHECK(devices >= 0);
}

TEST_CASE("collMemAlloc without a device: page-aligned shareable host memory", "[api][mem]") {
  int devices = 0;
  REQUIRE(collGetDeviceCount(&devices) == collSuccess);
  if (devices > 0) {
    WARN("not run: this machine has a CUDA device, where collMemAlloc gives device memory");
    return;
  }
  void* p = nullptr;
  REQUIRE(collMemAlloc(&p, 5000) == collSuccess);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
  std::memset(p, 0x7f, 5000);
  REQUIRE(collMemFree(p) == collSuccess);
  CHECK(collMemFree(p) == collInvalidArgument);
  CHECK(collMemAlloc(nullptr, 8) == collInvalidArgument);
  REQUIRE(collMemAlloc(&p, 0) == collSuccess);
  CHECK(p == nullptr);
  CHECK(collMemFree(nullptr) == collSuccess);
}

TEST_CASE("a single-rank communicator: queries, lifecycle, every collective", "[api]") {
  collComm_t comm = singleRank();
  int n = -1, r = -1, dev = 77;
  CHECK(collCommCount(comm, &n) == collSuccess);
  CHECK(n == 1);
  CHECK(collCommUserRank(comm, &r) == collSuccess);
  CHECK(r == 0);
  CHECK(collCommCount(comm, nullptr) == collInvalidArgument);
  if (coll::topo::cudaInfo().deviceCount == 0) {
    CHECK(collCommCuDevice(comm, &dev) == collInvalidUsage);
    CHECK(dev == 77);
    CHECK_THAT(collGetLastError(comm), Catch::Contains("host-only"));
  }
  collResult_t async = collInternalError;
  CHECK(collCommGetAsyncError(comm, &async) == collSuccess);
  CHECK(async == collSuccess);

  // One rank: every collective is a copy (or nothing), and sums are the value itself.
  float x = 3, y = 0;
  CHECK(collAllReduce(&x, &y, 1, collFloat32, collAvg, comm, nullptr) == collSuccess);
  CHECK(y == 3);
  y = 0;
  CHECK(collBroadcast(&x, &y, 1, collFloat32, 0, comm, nullptr) == collSuccess);
  CHECK(y == 3);
  CHECK(collReduce(&x, &x, 1, collFloat32, collSum, 0, comm, nullptr) == collSuccess);
  CHECK(collAllGather(&x, &x, 1, collFloat32, comm, nullptr) == collSuccess);
  CHECK(collReduceScatter(&x, &x, 1, collFloat32, collSum, comm, nullptr) == collSuccess);
  CHECK(collAllToAll(&x, &y, 1, collFloat32, comm, nullptr) == collSuccess);
  CHECK(collAllReduce(nullptr, nullptr, 0, collFloat32, collSum, comm, nullptr) == collSuccess);  // count 0: no-op
  CHECK(collGroupStart() == collSuccess);
  CHECK(collSend(&x, 1, collFloat32, 0, comm, nullptr) == collSuccess);
  CHECK(collRecv(&y, 1, collFloat32, 0, comm, nullptr) == collSuccess);
  y = 0;
  CHECK(collGroupEnd() == collSuccess);
  CHECK(y == 3);

  CHECK(collGroupEnd() == collInvalidUsage);
  CHECK(collGroupStart() == collSuccess);
  CHECK(collGroupStart() == collSuccess);
  CHECK(collGroupEnd() == collSuccess);
  CHECK(collGroupEnd() == collSuccess);

  collComm_t none = reinterpret_cast<collComm_t>(0x1);
  CHECK(collCommSplit(comm, -5, 0, &none, nullptr) == collInvalidArgument);
  CHECK(collCommSplit(comm, 0, 0, nullptr, nullptr) == collInvalidArgument);
  collConfig_t nb = COLL_CONFIG_INITIALIZER;
  nb.blocking = 0;
  REQUIRE(collCommSplit(comm, 0, 0, &none, &nb) == collInProgress);  // non-blocking: settles later
  for (collComm_t c : {comm, none}) CHECK(colltest::settle(c) == collSuccess);
  CHECK(collCommDestroy(none) == collSuccess);

  CHECK(collCommFinalize(comm) == collSuccess);
  CHECK(collCommFinalize(comm) == collInvalidUsage);
  CHECK(collCommDestroy(comm) == collSuccess);
  CHECK(collCommCount(comm, &n) == collInvalidArgument);  // destroyed handle: an error, not a crash
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("destroyed"));
  CHECK(collAllReduce(&x, &x, 1, collFloat32, collSum, comm, nullptr) == collInvalidArgument);
  CHECK(collCommDestroy(nullptr) == collSuccess);
  CHECK(collCommAbort(nullptr) == collSuccess);
  CHECK(collCommCount(nullptr, &n) == collInvalidArgument);
}

TEST_CASE("bad arguments to collectives are refused before anything is sent", "[api]") {
  collComm_t comm = singleRank();
  float x = 1;
  auto refused = [&](collResult_t rc, const char* words) {
    CHECK(rc == collInvalidArgument);
    CHECK_THAT(collGetLastError(comm), Catch::Contains(words));
  };
  refused(collAllReduce(nullptr, &x, 1, collFloat32, collSum, comm, nullptr), "sendbuff is NULL with count 1");
  refused(collAllReduce(&x, nullptr, 1, collFloat32, collSum, comm, nullptr), "recvbuff is NULL");
  refused(collAllReduce(&x, &x, 1, static_cast<collDataType_t>(12), collSum, comm, nullptr), "datatype 12");
  refused(collAllReduce(&x, &x, 1, static_cast<collDataType_t>(-1), collSum, comm, nullptr), "datatype -1");
  refused(collAllReduce(&x, &x, 1, collFloat32, static_cast<collRedOp_t>(5), comm, nullptr), "op 5");
  refused(collBroadcast(&x, &x, 1, collFloat32, 1, comm, nullptr), "root 1 is not a rank");
  refused(collReduce(&x, &x, 1, collFloat32, collSum, -1, comm, nullptr), "root -1");
  refused(collSend(&x, 1, collFloat32, 3, comm, nullptr), "peer 3 is not a rank");
  refused(collRecv(&x, 1, collFloat32, -2, comm, nullptr), "peer -2");
  refused(collAllReduce(&x, &x, SIZE_MAX / 2, collFloat32, collSum, comm, nullptr), "overflows");
  refused(collAllGather(&x, &x, SIZE_MAX / 3, collFloat32, comm, nullptr), "overflows");
  // Sizes that fit a size_t but no address space (they reached memcpy and faulted before).
  refused(collAllReduce(&x, &x, SIZE_MAX / 8, collFloat32, collSum, comm, nullptr), "more than a process can address");
  refused(collBroadcast(&x, &x, (size_t(1) << 45) + 1, collFloat32, 0, comm, nullptr), "2^47");
  refused(collSend(&x, SIZE_MAX / 16, collFloat64, 0, comm, nullptr), "more than a process can address");
  refused(collAllReduce(&x, &x, 1, collFloat32, collSum, comm, reinterpret_cast<collStream_t>(0x10)),
          "need a NULL stream or a live coll host stream");
  // Refusals do not break the communicator.
  CHECK(collAllReduce(&x, &x, 1, collFloat32, collSum, comm, nullptr) == collSuccess);
  // Inside a group the refusal is immediate too; collGroupEnd then drops what the group queued
  // (as ncclGroupEnd does) and says why, so that no peer sees a part of the group.
  float in[2] = {5, 6}, out[2] = {-1, -1};
  CHECK(collGroupStart() == collSuccess);
  CHECK(collAllReduce(in, out, 2, collFloat32, collSum, comm, nullptr) == collSuccess);
  refused(collSend(nullptr, 4, collFloat32, 0, comm, nullptr), "sendbuff is NULL");
  CHECK(collGroupEnd() == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("a call inside the group was refused, so none of its 1 "
                                                        "queued operation(s) ran: ") &&
                                            Catch::Contains("sendbuff is NULL"));
  CHECK((out[0] == -1 && out[1] == -1));
  // A simulated group: the tuner's estimate, nothing runs, the group is over.
  collSimInfo_t sim = COLL_SIM_INFO_INITIALIZER;
  CHECK(collGroupSimulateEnd(&sim) == collInvalidUsage);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("outside a group"));
  std::vector<float> big(1 << 18, 1.0f), bigOut(1 << 18, -1.0f);
  CHECK(collGroupStart() == collSuccess);
  CHECK(collAllReduce(big.data(), bigOut.data(), big.size(), collFloat32, collSum, comm, nullptr) == collSuccess);
  CHECK(collGroupSimulateEnd(nullptr) == collInvalidArgument);  // the group stays open
  CHECK(collGroupSimulateEnd(&sim) == collSuccess);
  CHECK(sim.estimatedTime >= 0.0f);
  CHECK(bigOut[0] == -1.0f);
  CHECK(collGroupEnd() == collInvalidUsage);  // the simulation ended it
  // The next group is not affected.
  CHECK(collGroupStart() == collSuccess);
  CHECK(collAllReduce(in, out, 2, collFloat32, collSum, comm, nullptr) == collSuccess);
  CHECK(collGroupEnd() == collSuccess);
  CHECK((out[0] == 5 && out[1] == 6));
  CHECK(collCommDestroy(comm) == collSuccess);
  refused(collAllReduce(&x, &x, 1, collFloat32, collSum, comm, nullptr), "destroyed");
}

TEST_CASE("an explicit CUDA device on a machine without one is refused", "[api]") {
  if (coll::topo::cudaInfo().deviceCount > 0) return;  // checked on GPU machines by tests/gpu
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.cudaDev = 0;
  cfg.bootstrapTimeoutMs = 2000;
  collComm_t comm = nullptr;
  CHECK(collCommInitRankConfig(&comm, 1, id, 0, &cfg) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("CUDA device 0 was requested"));
  int dev = 0;
  CHECK(collCommInitAll(&comm, 1, &dev) == collInvalidArgument);
}

TEST_CASE("collCommInitFromEnv: a singleton, and a clear error without a launcher", "[api]") {
  for (const char* v : {"COLL_RANK", "COLL_WORLD_SIZE", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "PMI_RANK", "PMI_SIZE"})
    unsetenv(v);
  collComm_t comm = nullptr;
  CHECK(collCommInitFromEnv(&comm) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("no launcher environment"));

  setenv("COLL_RANK", "0", 1);
  setenv("COLL_WORLD_SIZE", "1", 1);
  REQUIRE(collCommInitFromEnv(&comm) == collSuccess);
  int n = 0;
  CHECK(collCommCount(comm, &n) == collSuccess);
  CHECK(n == 1);
  CHECK(collCommDestroy(comm) == collSuccess);

  setenv("COLL_WORLD_SIZE", "2", 1);  // two ranks but no master address
  CHECK(collCommInitFromEnv(&comm) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("COLL_MASTER_ADDR"));
  unsetenv("COLL_RANK");
  unsetenv("COLL_WORLD_SIZE");
}

TEST_CASE("PreMulSum ops: NCCL's numbering, slots reused, the enum values, refusals with a sentence", "[api][redop]") {
  CHECK(collNumOps == 5);
  CHECK(static_cast<int>(collBand) == 0x40000000);
  CHECK(static_cast<int>(collBor) == 0x40000001);
  CHECK(static_cast<int>(collBxor) == 0x40000002);
  CHECK(static_cast<int>(collScalarDevice) == 0);
  CHECK(static_cast<int>(collScalarHostImmediate) == 1);

  collComm_t comm = singleRank();
  double half = 0.5, scalar = 4;
  collRedOp_t a, b, c;
  REQUIRE(collRedOpCreatePreMulSum(&a, &half, collFloat64, collScalarHostImmediate, comm) == collSuccess);
  REQUIRE(collRedOpCreatePreMulSum(&b, &scalar, collFloat64, collScalarDevice, comm) == collSuccess);
  CHECK(static_cast<int>(a) == 5);
  CHECK(static_cast<int>(b) == 6);
  // One rank: the result is the scaled input; immediate read at create, device at each run.
  half = 100;
  double in[3] = {2, -6, 1}, out[3] = {0, 0, 0};
  CHECK(collAllReduce(in, out, 3, collFloat64, a, comm, nullptr) == collSuccess);
  CHECK((out[0] == 1 && out[1] == -3 && out[2] == 0.5));
  CHECK(collAllReduce(in, out, 3, collFloat64, b, comm, nullptr) == collSuccess);
  CHECK((out[0] == 8 && out[1] == -24 && out[2] == 4));
  scalar = -2;
  CHECK(collAllReduce(in, in, 3, collFloat64, b, comm, nullptr) == collSuccess);  // in place
  CHECK((in[0] == -4 && in[1] == 12 && in[2] == -2));
  // Inside a group the device scalar is read when the group runs.
  CHECK(collGroupStart() == collSuccess);
  CHECK(collAllReduce(in, out, 3, collFloat64, b, comm, nullptr) == collSuccess);
  scalar = 0.25;
  CHECK(collGroupEnd() == collSuccess);
  CHECK((out[0] == -1 && out[1] == 3 && out[2] == -0.5));

  // Destroying frees the slot: the next create takes the lowest free index.
  CHECK(collRedOpDestroy(a, comm) == collSuccess);
  REQUIRE(collRedOpCreatePreMulSum(&c, &half, collFloat32, collScalarHostImmediate, comm) == collSuccess);
  CHECK(static_cast<int>(c) == 5);
  CHECK(collAllReduce(in, out, 3, collFloat64, c, comm, nullptr) == collInvalidArgument);
  CHECK_THAT(collGetLastError(comm), Catch::Contains("op 5 was made by collRedOpCreatePreMulSum for collFloat32 "
                                                     "and cannot reduce collFloat64"));
  CHECK(collRedOpDestroy(b, comm) == collSuccess);
  CHECK(collAllReduce(in, out, 3, collFloat64, b, comm, nullptr) == collInvalidArgument);
  CHECK_THAT(collGetLastError(comm), Catch::Contains("op 6 is not a collRedOp_t, nor an op that "
                                                     "collRedOpCreatePreMulSum made on this communicator"));
  CHECK(collRedOpDestroy(b, comm) == collInvalidArgument);
  CHECK_THAT(collGetLastError(comm), Catch::Contains("destroyed already"));
  CHECK(collRedOpDestroy(collAvg, comm) == collInvalidArgument);
  CHECK_THAT(collGetLastError(comm), Catch::Contains("collAvg is a built-in op"));
  float f = 1;
  CHECK(collAllReduce(&f, &f, 1, collFloat32, collBor, comm, nullptr) == collInvalidArgument);
  CHECK_THAT(collGetLastError(comm),
             Catch::Contains("collBor is a bitwise op, for the integer types only (collInt8 to collUint64), not "
                             "collFloat32"));
  uint32_t u[2] = {0xf0f0u, 0x1u};
  CHECK(collAllReduce(u, u, 2, collUint32, collBxor, comm, nullptr) == collSuccess);  // one rank: unchanged
  CHECK((u[0] == 0xf0f0u && u[1] == 0x1u));
  CHECK(collRedOpCreatePreMulSum(&a, &half, collFloat64, collScalarHostImmediate, nullptr) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("collRedOpCreatePreMulSum"));
  // c is still held: the communicator frees it.
  CHECK(collCommDestroy(comm) == collSuccess);
  CHECK(collRedOpDestroy(c, comm) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("destroyed"));
}
