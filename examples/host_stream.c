/* The README's host-stream example, whole: two all-reduces queued on a host stream while the
 * calling thread computes, then one synchronize. Run under a launcher: coll-run -n 2 host_stream. */
#include <stdlib.h>

/* README:begin host_stream */
#include <coll/coll.h>
#include <stdio.h>

int overlap(collComm_t comm, float* bucket0, size_t n0, float* bucket1, size_t n1) {
  collStream_t s;
  collHostStreamCreate(&s);
  collAllReduce(bucket0, bucket0, n0, collFloat32, collSum, comm, s); /* checked, queued, returns */
  collAllReduce(bucket1, bucket1, n1, collFloat32, collSum, comm, s);
  /* ... compute on this thread; the buffers stay untouched until the stream is synchronized ... */
  collResult_t r = collStreamSynchronize(s);
  if (r != collSuccess) fprintf(stderr, "%s\n", collGetLastError(NULL));
  collHostStreamDestroy(s);
  return r == collSuccess ? 0 : 1;
}
/* README:end */

int main(void) {
  collComm_t comm;
  if (collCommInitFromEnv(&comm) != collSuccess) return fprintf(stderr, "%s\n", collGetLastError(NULL)), 1;
  int rank, nranks;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &nranks);
  enum { n0 = 4096, n1 = 77 };
  float* b0 = malloc(n0 * sizeof(float));
  float* b1 = malloc(n1 * sizeof(float));
  for (int i = 0; i < n0; ++i) b0[i] = (float)(rank + i);
  for (int i = 0; i < n1; ++i) b1[i] = (float)(2 * rank);
  int bad = overlap(comm, b0, n0, b1, n1);
  for (int i = 0; i < n0; ++i) bad += b0[i] != (float)(nranks * (nranks - 1) / 2 + nranks * i);
  for (int i = 0; i < n1; ++i) bad += b1[i] != (float)(nranks * (nranks - 1));
  if (bad)
    fprintf(stderr, "host_stream: rank %d: %d wrong\n", rank, bad);
  else if (rank == 0)
    printf("host_stream: %d ranks: both queued all-reduces correct\n", nranks);
  collCommDestroy(comm);
  free(b0);
  free(b1);
  return bad != 0;
}
