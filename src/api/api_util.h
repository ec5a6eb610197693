// The C boundary: turning Status into collResult_t, recording the last error, and making sure no
// exception crosses extern "C".
#pragma once

#include <functional>
#include <new>
#include <stdexcept>

#include "base/status.h"
#include "coll/coll.h"

/// Marks a definition of a public C function: exported despite -fvisibility=hidden.
#define COLL_API extern "C" __attribute__((visibility("default")))

namespace coll {
struct CommOptions;
}

namespace coll::api {

/// Records a failed status as the last error (of the thread, and of comm when given), logs it once
/// at INFO, and returns its code. fn names the API function, which prefixes the message.
collResult_t fail(const char* fn, collComm_t comm, Status status);

/// Returns the code of status, recording it as the last error when it failed.
inline collResult_t finish(const char* fn, collComm_t comm, Status status) {
  return status.isOk() ? collSuccess : fail(fn, comm, std::move(status));
}

/// Runs body (returning Status) and converts it, catching every exception.
template <typename Body>
collResult_t guarded(const char* fn, collComm_t comm, Body&& body) noexcept {
  try {
    return finish(fn, comm, body());
  } catch (const std::bad_alloc&) {
    return fail(fn, comm, Status(collSystemError, "out of host memory"));
  } catch (const std::exception& e) {
    return fail(fn, comm, Status(collInternalError, std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return fail(fn, comm, Status(collInternalError, "unexpected exception"));
  }
}

/// True between collGroupStart and the matching collGroupEnd on this thread.
bool inGroup();

/// Queues an init or split called inside a group; collGroupEnd runs all of them at once, one
/// thread each, before the group's operations. This is how one thread creates several ranks'
/// communicators (NCCL's pattern): run in turn, the first would wait for ranks whose calls come
/// after it. The job records its own errors and returns its code.
void deferToGroupEnd(std::function<collResult_t()> job);

/// Queues a one-sided call made inside a group, checked already (job runs it and records its own
/// errors). collGroupEnd runs the group's puts and signals first, in call order, then its
/// collectives and sends/receives, then its waits (wait: true), so that a wait never holds up a
/// put of the same group.
void deferOneSided(bool wait, std::function<collResult_t()> job);

/// Records a call refused inside the current group (nothing outside one): collGroupEnd then
/// drops every operation the group queued, with comm's last error as the reason.
void refuseGroup(collResult_t rc, collComm_t comm);

/// A blocking split of every rank of comm into one new communicator with these options (an
/// internal one: collCommTaggedInit's); collective over comm. fn names the caller for errors.
collResult_t splitWithOptions(const char* fn, collComm_t comm, const CommOptions& options, collComm_t* newcomm);

}  // namespace coll::api
