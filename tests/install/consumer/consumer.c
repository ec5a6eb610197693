/* A C99 program using the installed coll: a one-rank communicator through the public API. */
#include <coll/coll.h>
#include <stdio.h>

int main(void) {
  int version = 0, n = 0;
  collUniqueId id;
  collComm_t comm = NULL;
  collConfig_t config = COLL_CONFIG_INITIALIZER;
  config.commName = "consumer";
  if (collGetVersion(&version) != collSuccess || version != COLL_VERSION_CODE) return 1;
  if (collGetUniqueId(&id) != collSuccess) return 2;
  if (collCommInitRankConfig(&comm, 1, id, 0, &config) != collSuccess) {
    fprintf(stderr, "init failed: %s\n", collGetLastError(NULL));
    return 3;
  }
  if (collCommCount(comm, &n) != collSuccess || n != 1) return 4;
  if (collCommDestroy(comm) != collSuccess) return 5;
  printf("consumer: coll %d works\n", version);
  return 0;
}
