#include "types.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>
#include <c10/util/Half.h>

#include <cstring>

namespace coll_torch {

void checkTensor(const at::Tensor& t, const char* what) {
  if (!t.defined()) throwError(std::string("coll: ") + what + ": a tensor is undefined");
  if (!t.device().is_cpu() && !t.is_cuda())
    throwError(std::string("coll: ") + what + ": tensors on " + t.device().str() + " are not supported");
  if (t.layout() != at::kStrided)
    throwError(std::string("coll: ") + what + ": only dense (strided) tensors are supported, not sparse ones");
}

void checkSameDtype(at::TensorList ts, const char* what) {
  for (const auto& t : ts) {
    checkTensor(t, what);
    if (t.scalar_type() != ts[0].scalar_type())
      throwError(std::string("coll: ") + what + ": tensors of different dtypes (" + c10::toString(ts[0].scalar_type()) +
                 " and " + c10::toString(t.scalar_type()) + ")");
  }
}

namespace {

bool typeOf(at::ScalarType s, collDataType_t* out) {
  switch (s) {
    case at::kFloat:
      *out = collFloat32;
      return true;
    case at::kDouble:
      *out = collFloat64;
      return true;
    case at::kHalf:
      *out = collFloat16;
      return true;
    case at::kBFloat16:
      *out = collBfloat16;
      return true;
    case at::kFloat8_e4m3fn:
      *out = collFloat8e4m3;
      return true;
    case at::kFloat8_e5m2:
      *out = collFloat8e5m2;
      return true;
    case at::kChar:
      *out = collInt8;
      return true;
    case at::kByte:
      *out = collUint8;
      return true;
    case at::kBool:
      *out = collUint8;
      return true;
    case at::kInt:
      *out = collInt32;
      return true;
    case at::kLong:
      *out = collInt64;
      return true;
    case at::kUInt32:
      *out = collUint32;
      return true;
    case at::kUInt64:
      *out = collUint64;
      return true;
    case at::kComplexFloat:
      *out = collFloat32;
      return true;
    case at::kComplexDouble:
      *out = collFloat64;
      return true;
    default:
      return false;
  }
}

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "UNUSED";
  }
}

// The PreMulSum factor as one element of the tensor's own type (coll multiplies in that type).
collRedOp_t preMulSum(const c10d::ReduceOp& op, at::ScalarType s, collDataType_t type, collComm_t comm,
                      const char* what) {
  auto* sup = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  if (!sup) throwError(std::string("coll: ") + what + ": PREMUL_SUM without its factor");
  double f = sup->tensor_factor.defined() ? sup->tensor_factor.to(at::kCPU).to(at::kDouble).item<double>()
                                          : sup->double_factor;
  unsigned char bytes[8] = {};
  // One element of the tensor's type holding the factor (torch's own rounding to it).
  auto put = [&](auto v) { std::memcpy(bytes, &v, sizeof(v)); };
  switch (type) {
    case collFloat32:
      put(static_cast<float>(f));
      break;
    case collFloat64:
      put(f);
      break;
    case collFloat16:
      put(c10::Half(static_cast<float>(f)));
      break;
    case collBfloat16:
      put(c10::BFloat16(static_cast<float>(f)));
      break;
    case collFloat8e4m3:
      put(c10::Float8_e4m3fn(static_cast<float>(f)));
      break;
    case collFloat8e5m2:
      put(c10::Float8_e5m2(static_cast<float>(f)));
      break;
    default:
      throwError(std::string("coll: ") + what + ": PREMUL_SUM needs a floating-point tensor, not " + c10::toString(s));
  }
  collRedOp_t out;
  if (collRedOpCreatePreMulSum(&out, bytes, type, collScalarHostImmediate, comm) != collSuccess)
    throwError(std::string("coll: ") + what + ": " + collGetLastError(comm));
  return out;
}

}  // namespace

Reduction reduction(const at::Tensor& t, const c10d::ReduceOp& op, collComm_t comm, Plan& plan, const char* what) {
  const at::ScalarType s = t.scalar_type();
  collDataType_t type;
  if (!typeOf(s, &type))
    throwError(std::string("coll: ") + what + ": coll cannot reduce " + c10::toString(s) +
               " tensors (types: float32/64, float16, bfloat16, int8, uint8, int16, uint16, int32, int64, uint32, "
               "uint64, bool, complex64/128 for SUM and AVG)");
  Reduction r{type, static_cast<size_t>(t.numel()), collSum};
  const bool complex = at::isComplexType(s);
  if (complex) r.count *= 2;
  auto refuse = [&] {
    throwError(std::string("coll: ") + what + ": ReduceOp." + opName(op.op_) + " is not defined for " +
               c10::toString(s) + " tensors");
  };
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      r.op = s == at::kBool ? collMax : collSum;
      break;
    case c10d::ReduceOp::AVG:
      if (s == at::kBool) refuse();
      r.op = collAvg;
      break;
    case c10d::ReduceOp::PRODUCT:
      if (complex) refuse();
      r.op = s == at::kBool ? collMin : collProd;
      break;
    case c10d::ReduceOp::MIN:
      if (complex) refuse();
      r.op = collMin;
      break;
    case c10d::ReduceOp::MAX:
      if (complex) refuse();
      r.op = collMax;
      break;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      if (at::isFloatingType(s) || complex) refuse();
      r.op = op.op_ == c10d::ReduceOp::BAND ? collBand : op.op_ == c10d::ReduceOp::BOR ? collBor : collBxor;
      break;
    case c10d::ReduceOp::PREMUL_SUM:
      r.op = preMulSum(op, s, type, comm, what);
      plan.ops.push_back(r.op);
      break;
    default:
      refuse();
  }
  return r;
}

namespace {

// A contiguous tensor of dtype `as` for coll to use in t's place, filled from t in queue order
// (Plan::before: earlier operations may still write t) and, with copyBack, copied back into t
// once the operation has completed. t itself when it is contiguous and of that dtype already.
at::Tensor staged(Plan& plan, const at::Tensor& t, at::ScalarType as, bool copyBack) {
  plan.keep.push_back(t);
  if (t.is_contiguous() && t.scalar_type() == as) return t;
  at::Tensor c = at::empty(t.sizes(), t.options().dtype(as).memory_format(at::MemoryFormat::Contiguous));
  plan.keep.push_back(c);
  // In-place operations read the current values, so outputs are staged too.
  plan.before.push_back([t, c]() mutable { c.copy_(t); });
  if (copyBack) plan.after.push_back([t, c]() mutable { t.copy_(c); });
  return c;
}

// coll has no 16-bit integer types: int16 and uint16 reduce as int32 and uint32. Exact for every
// op: min, max and the bitwise ops do not care about the width, and a sum or product taken in 32
// bits and cut back to 16 is the same value modulo 2^16 as one taken in 16 bits.
at::ScalarType wider(at::ScalarType s) {
  if (s == at::kShort) return at::kInt;
  if (s == at::kUInt16) return at::kUInt32;
  return s;
}

}  // namespace

at::Tensor input(Plan& plan, const at::Tensor& t) { return staged(plan, t, t.scalar_type(), false); }

at::Tensor output(Plan& plan, const at::Tensor& t) { return staged(plan, t, t.scalar_type(), true); }

at::Tensor reducibleInput(Plan& plan, const at::Tensor& t) { return staged(plan, t, wider(t.scalar_type()), false); }

at::Tensor reducibleOutput(Plan& plan, const at::Tensor& t) { return staged(plan, t, wider(t.scalar_type()), true); }

at::ScalarType reducibleType(at::ScalarType s) { return wider(s); }

}  // namespace coll_torch
