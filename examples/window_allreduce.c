/* The README's example of collectives on windows, whole: all-reduces on buffers from collMemAlloc
 * registered as symmetric windows, which may take the one-copy path; it checks every result and
 * says how many calls took the path. Run under a launcher: coll-run -n 2 window_allreduce. */
#include <stdio.h>

/* README:begin window_allreduce */
#include <coll/coll.h>

/* steps all-reduces of count floats on windows; 0 when every result is right, and in *onWindows
 * how many took the one-copy path */
int allreduce_on_windows(collComm_t comm, size_t count, int steps, unsigned long long* onWindows) {
  size_t bytes = count * sizeof(float);
  float *send, *recv;
  collWindow_t ws, wr;
  int nranks, bad = 0;
  collCommCount(comm, &nranks);
  if (collMemAlloc((void**)&send, bytes) != collSuccess) return 1; /* memory the host's ranks map */
  if (collMemAlloc((void**)&recv, bytes) != collSuccess) return 1;
  collCommWindowRegister(comm, send, bytes, &ws, COLL_WIN_COLL_SYMMETRIC); /* collective */
  collCommWindowRegister(comm, recv, bytes, &wr, COLL_WIN_COLL_SYMMETRIC);
  for (int step = 0; step < steps; ++step) {
    for (size_t i = 0; i < count; ++i) send[i] = (float)(step + i % 7);
    if (collAllReduce(send, recv, count, collFloat32, collSum, comm, NULL) != collSuccess) bad = 1;
    for (size_t i = 0; i < count; ++i) bad |= recv[i] != (float)(nranks * (step + i % 7));
  }
  collCommMemStats(comm, collStatWindowCollectives, onWindows);
  collCommWindowDeregister(comm, ws); /* collective, as the registration */
  collCommWindowDeregister(comm, wr);
  collMemFree(send);
  collMemFree(recv);
  return bad;
}
/* README:end */

int main(void) {
  collComm_t comm;
  if (collCommInitFromEnv(&comm) != collSuccess) return fprintf(stderr, "%s\n", collGetLastError(NULL)), 1;
  int rank, nranks;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &nranks);
  unsigned long long onWindows = 0;
  int bad = allreduce_on_windows(comm, 1 << 18, 10, &onWindows);
  if (bad)
    fprintf(stderr, "window_allreduce: rank %d: wrong result\n", rank);
  else if (rank == 0)
    printf("window_allreduce: %d ranks: 10 all-reduces of 1 MiB right, %llu on windows\n", nranks, onWindows);
  collCommDestroy(comm);
  return bad;
}
