#include "tools_common.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/arith.h"

namespace colltools {
namespace {

// nccl-tests' names (f8e4m3, f8e5m2 for the float8 types).
const char* kTypeNames[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                            "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
static_assert(sizeof(kTypeNames) / sizeof(kTypeNames[0]) == collNumTypes, "a name per collDataType_t");
const char* kOpNames[] = {"sum", "prod", "max", "min", "avg"};

using coll::kernels::dev::narrow;

}  // namespace

bool parseType(const char* text, collDataType_t* out) {
  std::string t = text;
  const char* aliases[][2] = {{"float32", "float"},        {"float16", "half"},      {"float64", "double"},
                              {"bf16", "bfloat16"},        {"float8e4m3", "f8e4m3"}, {"float8e5m2", "f8e5m2"},
                              {"float8_e4m3fn", "f8e4m3"}, {"float8_e5m2", "f8e5m2"}};
  for (auto& a : aliases)
    if (t == a[0]) t = a[1];
  for (int i = 0; i < collNumTypes; ++i)
    if (t == kTypeNames[i]) return *out = static_cast<collDataType_t>(i), true;
  return false;
}

bool parseOp(const char* text, collRedOp_t* out) {
  for (int i = 0; i < collNumOps; ++i)
    if (std::string(text) == kOpNames[i]) return *out = static_cast<collRedOp_t>(i), true;
  return false;
}

const char* typeName(collDataType_t t) { return kTypeNames[t]; }
const char* opName(collRedOp_t op) { return kOpNames[op]; }

size_t typeBytes(collDataType_t t) {
  static const size_t bytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return bytes[t];
}

void storeValue(void* buf, size_t i, collDataType_t t, double x) {
  char* p = static_cast<char*>(buf) + i * typeBytes(t);
  auto put = [&](auto v) { std::memcpy(p, &v, sizeof(v)); };
  switch (t) {
    case collInt8:
      return put(static_cast<int8_t>(static_cast<int64_t>(x)));
    case collUint8:
      return put(static_cast<uint8_t>(static_cast<int64_t>(x)));
    case collInt32:
      return put(static_cast<int32_t>(static_cast<int64_t>(x)));
    case collUint32:
      return put(static_cast<uint32_t>(static_cast<int64_t>(x)));
    case collInt64:
      return put(static_cast<int64_t>(x));
    case collUint64:
      return put(static_cast<uint64_t>(static_cast<int64_t>(x)));
    case collFloat16:
      return put(narrow(static_cast<float>(x), coll::kernels::dev::Half{}));
    case collFloat32:
      return put(static_cast<float>(x));
    case collFloat64:
      return put(x);
    case collBfloat16:
      return put(narrow(static_cast<float>(x), coll::kernels::dev::Bf16{}));
    case collFloat8e4m3:
      return put(narrow(static_cast<float>(x), coll::kernels::dev::Fp8E4m3{}));
    case collFloat8e5m2:
      return put(narrow(static_cast<float>(x), coll::kernels::dev::Fp8E5m2{}));
    default:
      return;
  }
}

double averageOf(double sum, int n, collDataType_t t) {
  switch (t) {
    case collFloat64:
      return sum / n;
    case collFloat16:
    case collFloat32:
    case collBfloat16:
    case collFloat8e4m3:
    case collFloat8e5m2:
      return static_cast<float>(sum) / static_cast<float>(n);
    default:
      return std::trunc(sum / n);  // integers: C division of the (exact) sum
  }
}

double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double acrossRanks(collComm_t comm, double mine, int mode, int nranks) {
  double out = mine;
  collRedOp_t op = mode == 2 ? collMin : (mode == 3 ? collMax : collSum);
  if (mode == 0) {
    collBroadcast(&mine, &out, 1, collFloat64, 0, comm, nullptr);
    return out;
  }
  collAllReduce(&mine, &out, 1, collFloat64, op, comm, nullptr);
  return mode == 1 ? out / nranks : out;
}

void acrossRanks(collComm_t comm, std::vector<double>* v, int mode, int nranks) {
  if (v->empty()) return;
  std::vector<double> out(v->size());
  if (mode == 0) {
    collBroadcast(v->data(), out.data(), v->size(), collFloat64, 0, comm, nullptr);
  } else {
    collRedOp_t op = mode == 2 ? collMin : (mode == 3 ? collMax : collSum);
    collAllReduce(v->data(), out.data(), v->size(), collFloat64, op, comm, nullptr);
    if (mode == 1)
      for (double& x : out) x /= nranks;
  }
  *v = out;
}

std::string formatTime(double us) {
  if (us >= 1e6) return fmt::format("{:7.0f}", us);
  if (us >= 1e4) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

}  // namespace colltools
