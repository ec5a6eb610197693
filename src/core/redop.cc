#include "core/redop.h"

#include <cstring>

#include "kernels/cpu/reduce.h"
#include "kernels/cuda/device.h"
#include "topo/cuda_probe.h"

namespace coll {
namespace {

// More live ops than any program needs, and far below collBand - collNumOps.
constexpr size_t kMaxOps = size_t(1) << 20;

bool isDynamic(int op) { return op >= collNumOps && op < collBand; }

}  // namespace

std::string opName(int op) {
  static const char* const kBuiltIn[] = {"collSum", "collProd", "collMax", "collMin", "collAvg"};
  static const char* const kBitwise[] = {"collBand", "collBor", "collBxor"};
  if (op >= 0 && op < collNumOps) return kBuiltIn[op];
  if (op >= collBand && op <= collBxor) return kBitwise[op - collBand];
  return fmt::format(FMT_STRING("op {}"), op);
}

std::string typeName(int type) {
  static const char* const kNames[] = {"collInt8",    "collUint8",    "collInt32",      "collUint32",
                                       "collInt64",   "collUint64",   "collFloat16",    "collFloat32",
                                       "collFloat64", "collBfloat16", "collFloat8e4m3", "collFloat8e5m2"};
  if (type >= 0 && type < collNumTypes) return kNames[type];
  return fmt::format(FMT_STRING("datatype {}"), type);
}

Result<int> createPreMulSum(collComm* comm, const void* scalar, int type, int residence) {
  if (type < 0 || type >= collNumTypes)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("datatype {} is not a collDataType_t"), type);
  if (residence != collScalarDevice && residence != collScalarHostImmediate)
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("residence {} is not collScalarDevice (0) or collScalarHostImmediate (1)"), residence);
  if (!scalar) return Status(collInvalidArgument, "scalar is NULL");
  PreMulSumOp p;
  p.inUse = true;
  p.type = static_cast<collDataType_t>(type);
  p.residence = static_cast<collScalarResidence_t>(residence);
  if (p.residence == collScalarHostImmediate)
    std::memcpy(p.value, scalar, kernels::typeSize(p.type));
  else
    p.pointer = scalar;
  size_t slot = 0;
  while (slot < comm->redOps.size() && comm->redOps[slot].inUse) ++slot;
  if (slot == kMaxOps)
    return COLL_ERROR(collInvalidUsage, FMT_STRING("the communicator holds {} ops already; destroy some first"),
                      kMaxOps);
  if (slot == comm->redOps.size())
    comm->redOps.push_back(p);
  else
    comm->redOps[slot] = p;
  return collNumOps + static_cast<int>(slot);
}

Status destroyRedOp(collComm* comm, int op) {
  if ((op >= 0 && op < collNumOps) || (op >= collBand && op <= collBxor))
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("{} is a built-in op; collRedOpDestroy frees only ops made by "
                                 "collRedOpCreatePreMulSum"),
                      opName(op));
  if (!preMulSumOp(comm, op))
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("op {} was not made by collRedOpCreatePreMulSum on this communicator, or was "
                                 "destroyed already"),
                      op);
  comm->redOps[static_cast<size_t>(op - collNumOps)] = PreMulSumOp{};
  while (!comm->redOps.empty() && !comm->redOps.back().inUse) comm->redOps.pop_back();
  return Status::ok();
}

const PreMulSumOp* preMulSumOp(const collComm* comm, int op) {
  if (!isDynamic(op)) return nullptr;
  size_t slot = static_cast<size_t>(op - collNumOps);
  if (slot >= comm->redOps.size() || !comm->redOps[slot].inUse) return nullptr;
  return &comm->redOps[slot];
}

Status checkRedOp(const collComm* comm, int op, int type) {
  auto t = static_cast<collDataType_t>(type);
  if (op >= 0 && op < collNumOps) return Status::ok();
  if (op >= collBand && op <= collBxor) {
    if (kernels::supportsOp(t, static_cast<collRedOp_t>(op))) return Status::ok();
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("{} is a bitwise op, for the integer types only (collInt8 to collUint64), not {}"),
                      opName(op), typeName(type));
  }
  const PreMulSumOp* p = preMulSumOp(comm, op);
  if (!p)
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("op {} is not a collRedOp_t, nor an op that collRedOpCreatePreMulSum made on this "
                                 "communicator (another communicator's op, or one destroyed already)"),
                      op);
  if (p->type != t)
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("op {} was made by collRedOpCreatePreMulSum for {} and cannot reduce {}"), op,
                      typeName(p->type), typeName(type));
  return Status::ok();
}

Status readScalar(const PreMulSumOp& p, void* out) {
  size_t bytes = kernels::typeSize(p.type);
  if (p.residence == collScalarHostImmediate) {
    std::memcpy(out, p.value, bytes);
    return Status::ok();
  }
  // Asked only where a driver sees devices, as validate() does: host-only machines pay nothing.
  int dev = -1;
  if (topo::cudaInfo().deviceCount > 0 && kernels::cuda::isDeviceMemory(p.pointer, &dev)) {
    std::string e = kernels::cuda::copyToHost(out, p.pointer, bytes);
    if (!e.empty())
      return COLL_ERROR(collUnhandledCudaError,
                        FMT_STRING("reading the collScalarDevice scalar of a PreMulSum op from CUDA device {} "
                                   "failed: {}"),
                        dev, e);
    return Status::ok();
  }
  std::memcpy(out, p.pointer, bytes);
  return Status::ok();
}

}  // namespace coll
