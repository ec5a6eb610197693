// A rank program for the process tests, started by coll-run, mpirun, or the tests themselves.
//
//   coll_test_worker basic [RANKVAR SIZEVAR]  init from env; check rank/size against the launcher's
//                                             own variables; all-gather, send/recv, splits; finalize
//   coll_test_worker init-expect-fail         init from env; print the error; exit 3 if it failed
//   coll_test_worker fail-rank R CODE         init; rank R exits with CODE, the others wait in a
//                                             barrier (which only a launcher's kill ends early)
//   coll_test_worker sleep S                  sleep S seconds (launcher tests)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "coll/coll.h"
#include "core/comm.h"
#include "multiproc/checks.h"

namespace {

int fail(int rank, const std::string& what) {
  std::printf("worker rank %d FAILED: %s\n", rank, what.c_str());
  return 1;
}

int basic(const char* rankVar, const char* sizeVar) {
  collComm_t comm = nullptr;
  collResult_t rc = collCommInitFromEnv(&comm);
  if (rc != collSuccess) return fail(-1, std::string("init: ") + collGetLastError(nullptr));
  int rank = -1, size = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &size);
  const char* wantRank = std::getenv(rankVar);
  const char* wantSize = std::getenv(sizeVar);
  if (!wantRank || !wantSize || std::atoi(wantRank) != rank || std::atoi(wantSize) != size)
    return fail(rank, std::string("rank/size disagree with ") + rankVar + "/" + sizeVar);
  std::string err = colltest::checkAllGather(comm);
  if (err.empty()) err = colltest::checkSendRecv(comm);
  if (err.empty()) err = colltest::checkSplits(comm);
  if (!err.empty()) return fail(rank, err);
  if ((rc = collCommFinalize(comm)) != collSuccess) return fail(rank, collGetLastError(comm));
  if ((rc = collCommDestroy(comm)) != collSuccess) return fail(rank, collGetLastError(nullptr));
  std::printf("worker rank %d/%d ok (pid %d)\n", rank, size, getpid());
  return 0;
}

int initExpectFail() {
  collComm_t comm = nullptr;
  auto start = std::chrono::steady_clock::now();
  collResult_t rc = collCommInitFromEnv(&comm);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rc == collSuccess) {
    std::printf("init unexpectedly succeeded\n");
    collCommDestroy(comm);
    return 0;
  }
  std::printf("init failed after %.2f s: %s: %s\n", s, collGetErrorString(rc), collGetLastError(nullptr));
  return 3;
}

int failRank(int victim, int code) {
  collComm_t comm = nullptr;
  if (collCommInitFromEnv(&comm) != collSuccess) return fail(-1, collGetLastError(nullptr));
  int rank = -1;
  collCommUserRank(comm, &rank);
  std::printf("worker rank %d initialized\n", rank);
  std::fflush(stdout);
  if (rank == victim) _exit(code);
  comm->bootstrap->barrier().isOk();  // blocks until the launcher ends us (or the deadline)
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "basic") return basic(argc > 3 ? argv[2] : "COLL_RANK", argc > 3 ? argv[3] : "COLL_WORLD_SIZE");
  if (mode == "init-expect-fail") return initExpectFail();
  if (mode == "fail-rank" && argc == 4) return failRank(std::atoi(argv[2]), std::atoi(argv[3]));
  if (mode == "sleep" && argc == 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(std::atof(argv[2]) * 1000)));
    return 0;
  }
  std::fprintf(stderr, "usage: coll_test_worker basic|init-expect-fail|fail-rank R CODE|sleep S\n");
  return 2;
}
