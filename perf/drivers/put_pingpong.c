/* One-way latency of a small message between 2 ranks, coll's two ways: a one-sided put with its
 * signal (collPutSignal into the peer's window, collWaitSignal for the peer's answer) and a
 * send/receive pair (collSend, collRecv). Ping-pong: rank 0 sends, rank 1 answers, and the one-way
 * time is half the round trip. Prints "<mode> <bytes> B: <us> us one-way". Run under coll-run:
 *   coll-run -n 2 put_pingpong put|sendrecv [bytes] [iterations] [warmup] */
#include <coll/coll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double nowUs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

#define CHECK(call)                                               \
  do {                                                            \
    if ((call) != collSuccess) {                                  \
      fprintf(stderr, "%s: %s\n", #call, collGetLastError(comm)); \
      exit(1);                                                    \
    }                                                             \
  } while (0)

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "put";
  size_t bytes = argc > 2 ? strtoull(argv[2], NULL, 10) : 8;
  long iters = argc > 3 ? atol(argv[3]) : 20000, warmup = argc > 4 ? atol(argv[4]) : 1000;
  collComm_t comm = NULL;
  if (collCommInitFromEnv(&comm) != collSuccess) return fprintf(stderr, "%s\n", collGetLastError(NULL)), 1;
  int rank, n;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  if (n != 2) return fprintf(stderr, "put_pingpong: 2 ranks, not %d\n", n), 1;
  int peer = 1 - rank, put = strcmp(mode, "put") == 0;
  char *src = NULL, *win = NULL;
  collWindow_t w = NULL;
  CHECK(collMemAlloc((void**)&src, bytes ? bytes : 1));
  CHECK(collMemAlloc((void**)&win, bytes ? bytes : 1));
  memset(src, rank + 1, bytes ? bytes : 1);
  if (put) CHECK(collCommWindowRegister(comm, win, bytes ? bytes : 1, &w, COLL_WIN_DEFAULT));
  collWaitSignalDesc_t fromPeer = {1, peer, 0, 0};
  double t0 = 0;
  for (long i = -warmup; i < iters; ++i) {
    if (i == 0) {
      CHECK(collAllReduce(src, src, 0, collInt8, collSum, comm, NULL)); /* line up (no bytes) */
      t0 = nowUs();
    }
    if (rank == 0) {
      if (put) {
        CHECK(collPutSignal(src, bytes, collInt8, peer, w, 0, 0, 0, 0, comm, NULL));
        CHECK(collWaitSignal(1, &fromPeer, comm, NULL));
      } else {
        CHECK(collSend(src, bytes, collInt8, peer, comm, NULL));
        CHECK(collRecv(win, bytes, collInt8, peer, comm, NULL));
      }
    } else {
      if (put) {
        CHECK(collWaitSignal(1, &fromPeer, comm, NULL));
        CHECK(collPutSignal(src, bytes, collInt8, peer, w, 0, 0, 0, 0, comm, NULL));
      } else {
        CHECK(collRecv(win, bytes, collInt8, peer, comm, NULL));
        CHECK(collSend(src, bytes, collInt8, peer, comm, NULL));
      }
    }
  }
  double us = (nowUs() - t0) / iters / 2;
  if (win[0] != (char)(peer + 1) && bytes > 0) return fprintf(stderr, "put_pingpong: wrong data\n"), 1;
  if (rank == 0) printf("%s %zu B: %.3f us one-way\n", put ? "coll-put" : "coll-sendrecv", bytes, us);
  if (put) CHECK(collCommWindowDeregister(comm, w));
  collMemFree(src);
  collMemFree(win);
  collCommDestroy(comm);
  return 0;
}
