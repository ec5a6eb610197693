// The reduction operators a communicator holds (collRedOpCreatePreMulSum), and the check of an op
// argument against a collective's type.
//
// A PreMulSum op is the value collNumOps + i for slot i of comm->redOps. It runs as collSum over a
// staged copy of the input multiplied by the rank's scalar (see runCollective in enqueue.cc).
#pragma once

#include <string>

#include "base/status.h"
#include "coll/coll.h"
#include "core/comm.h"

namespace coll {

/// Creates a PreMulSum op on comm (a live comm) and returns its value. type and residence are the
/// raw C arguments, checked here; a HostImmediate scalar is copied now.
Result<int> createPreMulSum(collComm* comm, const void* scalar, int type, int residence);

/// Frees op on comm; collInvalidArgument for a built-in op or one comm does not hold.
Status destroyRedOp(collComm* comm, int op);

/// Whether op is usable by a reducing collective of type (a valid collDataType_t) on comm: a
/// built-in op, a bitwise one with an integer type, or a live PreMulSum op of comm created for
/// type. The refusals are collInvalidArgument with a sentence naming op and type.
Status checkRedOp(const collComm* comm, int op, int type);

/// The live PreMulSum op behind op, or nullptr (a built-in op, or none).
const PreMulSumOp* preMulSumOp(const collComm* comm, int op);

/// Reads the scalar of p into out (the type's size): the copy taken at create, or the current
/// value behind the collScalarDevice pointer (host memory, or CUDA memory through the runtime).
Status readScalar(const PreMulSumOp& p, void* out);

/// "collSum", "collBand", ... or the number, for messages.
std::string opName(int op);
/// "collFloat32", ... or the number, for messages.
std::string typeName(int type);

}  // namespace coll
