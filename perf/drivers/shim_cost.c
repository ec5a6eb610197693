/*
 * What the NCCL drop-in costs: the same 8-byte all-reduce on a one-rank host communicator called
 * through libnccl.so.2 (ncclAllReduce) and through coll.h (collAllReduce), and a
 * register/deregister pair through each, in one process, alternating rounds. A one-rank
 * communicator moves nothing between ranks, so the figures are the call paths themselves.
 *
 *   shim_cost ROUNDS ITERS      prints one line per round and kind: "kind ns_per_call"
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "coll/coll.h"

/* NCCL's prototypes (nccl.h's, with plain int enums): linked from coll's libnccl.so.2. */
int ncclAllReduce(const void*, void*, size_t, int, int, collComm_t, collStream_t);
int ncclCommRegister(collComm_t, void*, size_t, void**);
int ncclCommDeregister(collComm_t, void*);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5, iters = argc > 2 ? atoi(argv[2]) : 100000;
  collUniqueId id;
  collComm_t comm;
  float x[2] = {1, 2}, y[2];
  char buf[4096];
  void* h;
  if (collGetUniqueId(&id) != collSuccess || collCommInitRank(&comm, 1, id, 0) != collSuccess) return 1;
  for (int r = 0; r < rounds; ++r) {
    double t = now();
    for (int i = 0; i < iters; ++i)
      if (collAllReduce(x, y, 2, collFloat32, collSum, comm, NULL) != collSuccess) return 1;
    printf("coll_allreduce %.1f\n", (now() - t) / iters);
    t = now();
    for (int i = 0; i < iters; ++i)
      if (ncclAllReduce(x, y, 2, 7 /* ncclFloat32 */, 0 /* ncclSum */, comm, NULL) != 0) return 1;
    printf("nccl_allreduce %.1f\n", (now() - t) / iters);
    t = now();
    for (int i = 0; i < iters; ++i)
      if (collCommRegister(comm, buf, sizeof(buf), &h) != collSuccess || collCommDeregister(comm, h) != collSuccess)
        return 1;
    printf("coll_register_pair %.1f\n", (now() - t) / iters);
    t = now();
    for (int i = 0; i < iters; ++i)
      if (ncclCommRegister(comm, buf, sizeof(buf), &h) != 0 || ncclCommDeregister(comm, h) != 0) return 1;
    printf("nccl_register_pair %.1f\n", (now() - t) / iters);
  }
  return collCommDestroy(comm) == collSuccess ? 0 : 1;
}
