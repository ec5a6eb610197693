/* The README's first example, whole: rank 0's unique id reaches every rank (here by fork, which
 * copies it; a real job sends the 128 bytes through its own launcher), each rank initializes,
 * all-reduces, and swaps a buffer with a neighbour in a group. main() checks every result.
 * Run: first_steps [nranks] (default 3). */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* README:begin first_steps */
#include <coll/coll.h>
#include <stdio.h>

/* One rank of nranks; rank 0 made `id` with collGetUniqueId and sent its 128 bytes to every rank. */
int step(collUniqueId id, int rank, int nranks, float* grads, size_t n, float* buf, float* buf2, int peer) {
  collComm_t comm;
  if (collCommInitRank(&comm, nranks, id, rank) != collSuccess) {
    fprintf(stderr, "%s\n", collGetLastError(NULL)); /* names the rank, the peer, the cause */
    return 1;
  }
  collAllReduce(grads, grads, n, collFloat32, collSum, comm, NULL); /* host memory: stream NULL */
  collGroupStart();                                                 /* any send/recv pattern */
  collSend(buf, n, collFloat32, peer, comm, NULL);
  collRecv(buf2, n, collFloat32, peer, comm, NULL);
  if (collGroupEnd() != collSuccess) fprintf(stderr, "%s\n", collGetLastError(comm));
  collCommFinalize(comm);
  collCommDestroy(comm);
  return 0;
}
/* README:end */

static int runRank(collUniqueId id, int rank, int nranks) {
  enum { n = 1000 };
  float grads[n], buf[n], buf2[n];
  for (int i = 0; i < n; ++i) {
    grads[i] = (float)(rank + i);
    buf[i] = (float)(rank * 10000 + i);
    buf2[i] = -1;
  }
  /* Ranks pair up 0<->1, 2<->3, ...; with an odd count the last rank swaps with itself. */
  int peer = (rank % 2 == 0) ? (rank + 1 < nranks ? rank + 1 : rank) : rank - 1;
  if (step(id, rank, nranks, grads, n, buf, buf2, peer) != 0) return 1;
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    float sum = (float)(nranks * (nranks - 1) / 2 + nranks * i); /* exact: small integers */
    bad += grads[i] != sum || buf2[i] != (float)(peer * 10000 + i);
  }
  if (bad) fprintf(stderr, "first_steps: rank %d: %d wrong elements\n", rank, bad);
  return bad != 0;
}

int main(int argc, char** argv) {
  int nranks = argc > 1 ? atoi(argv[1]) : 3;
  if (nranks < 1 || nranks > 64) return fprintf(stderr, "usage: first_steps [nranks 1..64]\n"), 2;
  collUniqueId id;
  if (collGetUniqueId(&id) != collSuccess) return fprintf(stderr, "%s\n", collGetLastError(NULL)), 1;
  for (int r = 0; r < nranks; ++r)
    if (fork() == 0) _exit(runRank(id, r, nranks));
  int failed = 0, status;
  while (wait(&status) > 0) failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  if (failed) return fprintf(stderr, "first_steps: %d rank(s) failed\n", failed), 1;
  printf("first_steps: %d ranks: all-reduce and send/recv correct\n", nranks);
  return 0;
}
