// Errors of the client layer (coll's parallel training building blocks): exceptions carrying a
// sentence, coll's own where a coll call failed.
#pragma once

#include <stdexcept>
#include <string>

#include "coll/coll.h"

namespace coll::parallel {

/// A refused configuration or a failed coll call; what() says which and how to fix it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws Error naming `what` and carrying collGetLastError's sentence when rc is not collSuccess.
void check(collResult_t rc, collComm_t comm, const char* what);

}  // namespace coll::parallel
