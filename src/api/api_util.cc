#include "api/api_util.h"

#include "api/last_error.h"
#include "base/log.h"
#include "core/comm.h"

namespace coll::api {

collResult_t fail(const char* fn, collComm_t comm, Status status) {
  std::string where = fn;
  {
    CallGuard guard(comm);  // a destroyed handle must not be read
    if (guard.ok()) where += fmt::format(" (rank {} of {})", comm->rank, comm->nranks);
  }
  std::string text = fmt::format("{}: {}", where, status.message());
  // INFO, not WARN: the caller gets the code and collGetLastError's sentence and reports it
  // (coll-perf, the PyTorch backend); a WARN here made every error appear twice by default.
  COLL_LOG(INFO, INIT, "{} [{}]", text, resultName(status.code()));
  if (!status.breadcrumbs().empty()) COLL_LOG(TRACE, INIT, "{} error path: {}", fn, status.breadcrumbs());
  setLastError(comm, text);
  return status.code();
}

}  // namespace coll::api
