/* The README's tagged-messages example, whole: every rank but 0 sends its rank to rank 0, which
 * receives from any source, in whatever order the messages come. Run under a launcher:
 * coll-run -n 3 tagged. */
#include <stdlib.h>

/* README:begin tagged */
#include <coll/coll.h>
#include <stdio.h>

int gather_any(collComm_t comm, int rank, int nranks) {
  float v = (float)rank;
  if (collCommTaggedInit(comm) != collSuccess) return 1; /* every rank, once */
  if (rank != 0) {
    collRequest_t s;
    collIsend(&v, 1, collFloat32, 0, /* tag */ 7, comm, &s);
    return collWait(&s, NULL) != collSuccess; /* or collTest, or collRequestFree */
  }
  unsigned seen = 0;
  for (int i = 1; i < nranks; ++i) {
    collRequest_t r;
    collMsgStatus_t st; /* who sent it, its tag and size */
    collIrecv(&v, 1, collFloat32, COLL_ANY_SOURCE, 7, comm, &r);
    if (collWait(&r, &st) != collSuccess) return fprintf(stderr, "%s\n", collGetLastError(comm)), 1;
    if (v != (float)st.source) return 1;
    seen |= 1u << st.source;
  }
  return seen != ((1u << nranks) - 2u);
}
/* README:end */

int main(void) {
  collComm_t comm;
  if (collCommInitFromEnv(&comm) != collSuccess) return fprintf(stderr, "%s\n", collGetLastError(NULL)), 1;
  int rank, nranks;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &nranks);
  int bad = gather_any(comm, rank, nranks);
  if (bad)
    fprintf(stderr, "tagged: rank %d: wrong\n", rank);
  else if (rank == 0)
    printf("tagged: %d ranks: rank 0 received every other rank's message from any source\n", nranks);
  collCommDestroy(comm);
  return bad != 0;
}
