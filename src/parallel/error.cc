#include "coll/parallel/error.h"

namespace coll::parallel {

void check(collResult_t rc, collComm_t comm, const char* what) {
  if (rc == collSuccess) return;
  const char* sentence = collGetLastError(comm);
  throw Error(std::string(what) + " failed: " + collGetErrorString(rc) + ": " + (sentence ? sentence : ""));
}

}  // namespace coll::parallel
