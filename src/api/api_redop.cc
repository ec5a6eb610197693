// collRedOpCreatePreMulSum and collRedOpDestroy: the reduction operators a communicator holds.
// Both are local (nothing is sent); the table itself is in core/redop.h.
#include "api/api_util.h"
#include "coll/coll.h"
#include "core/comm.h"
#include "core/enqueue.h"
#include "core/redop.h"

using coll::CallGuard;
using coll::Status;

COLL_API collResult_t collRedOpCreatePreMulSum(collRedOp_t* op, void* scalar, collDataType_t datatype,
                                               collScalarResidence_t residence, collComm_t comm) {
  return coll::api::guarded("collRedOpCreatePreMulSum", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    COLL_TRY(coll::checkReady(comm));
    if (!op) return Status(collInvalidArgument, "op is NULL");
    COLL_ASSIGN_OR_RETURN(int value,
                          coll::createPreMulSum(comm, scalar, coll::rawEnum(datatype), coll::rawEnum(residence)));
    *op = static_cast<collRedOp_t>(value);
    return Status::ok();
  });
}

COLL_API collResult_t collRedOpDestroy(collRedOp_t op, collComm_t comm) {
  return coll::api::guarded("collRedOpDestroy", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    return coll::destroyRedOp(comm, coll::rawEnum(op));
  });
}
