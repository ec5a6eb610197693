// A parameter as the client layer sees it: flat float32 values and their gradient.
#pragma once

#include <string>
#include <vector>

namespace coll::parallel {

struct Param {
  std::string name;
  std::vector<float> value;
  std::vector<float> grad;  // same size as value; backward adds into it

  size_t size() const { return value.size(); }
  /// Zeroes the gradient (after an optimizer step).
  void zeroGrad() { grad.assign(value.size(), 0.0f); }
};

}  // namespace coll::parallel
