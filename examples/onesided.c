/* The README's one-sided example, whole: a periodic halo exchange in which every rank puts its
 * edge values straight into its neighbours' windows and waits for their signals. Run under a
 * launcher: coll-run -n 4 onesided. */
#include <stdlib.h>

/* README:begin onesided */
#include <coll/coll.h>
#include <stdio.h>

enum { N = 1024 }; /* interior points per rank; the window holds [left halo | interior | right halo] */

int halo_exchange(collComm_t comm, int rank, int nranks) {
  float* u;
  collWindow_t win;
  if (collMemAlloc((void**)&u, (N + 2) * sizeof(float)) != collSuccess) return 1; /* peers map it */
  for (int i = 1; i <= N; ++i) u[i] = (float)(rank * N + i);
  if (collCommWindowRegister(comm, u, (N + 2) * sizeof(float), &win, COLL_WIN_DEFAULT) != collSuccess) return 1;
  int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;
  /* My first point is my left neighbour's right halo, my last its right neighbour's left halo. */
  collPutSignal(&u[1], 1, collFloat32, left, win, (N + 1) * sizeof(float), 0, 0, 0, comm, NULL);
  collPutSignal(&u[N], 1, collFloat32, right, win, 0, 0, 0, 0, comm, NULL);
  collWaitSignalDesc_t from[2] = {{1, left, 0, 0}, {1, right, 0, 0}};
  if (collWaitSignal(2, from, comm, NULL) != collSuccess) return fprintf(stderr, "%s\n", collGetLastError(comm)), 1;
  int ok = u[0] == (float)(left * N + N) && u[N + 1] == (float)(right * N + 1);
  collCommWindowDeregister(comm, win); /* collective: no rank writes into it after this */
  collMemFree(u);
  return !ok;
}
/* README:end */

int main(void) {
  collComm_t comm;
  if (collCommInitFromEnv(&comm) != collSuccess) return fprintf(stderr, "%s\n", collGetLastError(NULL)), 1;
  int rank, nranks;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &nranks);
  int bad = halo_exchange(comm, rank, nranks);
  if (bad)
    fprintf(stderr, "onesided: rank %d: wrong halo\n", rank);
  else if (rank == 0)
    printf("onesided: %d ranks: every halo holds its neighbour's edge\n", nranks);
  collCommDestroy(comm);
  return bad != 0;
}
