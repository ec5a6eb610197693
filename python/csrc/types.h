// How torch tensors, dtypes and reduce ops map onto coll's buffers, types and operators.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>

#include "coll/coll.h"
#include "launch.h"

namespace coll_torch {

/// A reduction as coll runs it: the tensor's data seen as `type`, `count` elements, with `op`.
struct Reduction {
  collDataType_t type;
  size_t count;
  collRedOp_t op;
};

/// Refuses what coll cannot take (sparse tensors, devices other than the CPU and CUDA), naming
/// the operation. Every tensor an operation touches passes through here.
void checkTensor(const at::Tensor& t, const char* what);
/// checkTensor for each, and the same dtype as the first.
void checkSameDtype(at::TensorList ts, const char* what);

/// Maps a tensor and a torch ReduceOp onto a coll reduction. bool reduces as uint8 (SUM is MAX,
/// PRODUCT is MIN, as NCCL's backend does); complex SUM/AVG/PREMUL_SUM reduce the real and
/// imaginary parts as floats. PREMUL_SUM creates a coll operator that plan.ops records (it is
/// destroyed once the plan is issued). Throws for a dtype or op coll cannot reduce.
Reduction reduction(const at::Tensor& t, const c10d::ReduceOp& op, collComm_t comm, Plan& plan, const char* what);

/// Bytes of a contiguous tensor: operations that only move data send raw bytes, so every dtype
/// works, int16 and complex included.
inline size_t bytesOf(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

/// A contiguous tensor holding t's values for coll to read (t itself, or a copy staged in queue
/// order); kept alive by plan.
at::Tensor input(Plan& plan, const at::Tensor& t);
/// A contiguous tensor for coll to write t's result into: t itself when contiguous, else a copy
/// staged in queue order whose values are copied back into t once the operation has completed.
at::Tensor output(Plan& plan, const at::Tensor& t);

/// input() and output() for a tensor to be reduced: int16 and uint16 tensors, which coll cannot
/// reduce, are staged as int32 and uint32 copies in queue order (and copied back for outputs).
at::Tensor reducibleInput(Plan& plan, const at::Tensor& t);
at::Tensor reducibleOutput(Plan& plan, const at::Tensor& t);
/// The dtype reducibleInput/Output stage s as.
at::ScalarType reducibleType(at::ScalarType s);

}  // namespace coll_torch
