#include "coll/parallel/mesh.h"

#include <set>

#include "coll/parallel/error.h"

namespace coll::parallel {

ProcessMesh::ProcessMesh(collComm_t world, std::vector<std::pair<std::string, int>> dims) : dims_(std::move(dims)) {
  check(collCommUserRank(world, &worldRank_), world, "ProcessMesh: collCommUserRank");
  check(collCommCount(world, &worldSize_), world, "ProcessMesh: collCommCount");
  // Every check before the first split: a refused mesh sends nothing.
  if (dims_.empty()) throw Error("ProcessMesh: no dimensions given; pass at least one, e.g. {{\"dp\", nranks}}");
  long product = 1;
  std::set<std::string> names;
  std::string shape;
  for (const auto& [name, size] : dims_) {
    if (size < 1)
      throw Error("ProcessMesh: dimension '" + name + "' has size " + std::to_string(size) + "; sizes are at least 1");
    if (!names.insert(name).second) throw Error("ProcessMesh: dimension name '" + name + "' is used twice");
    product *= size;
    shape += (shape.empty() ? "" : " x ") + name + "=" + std::to_string(size);
  }
  if (product != worldSize_)
    throw Error("ProcessMesh: " + shape + " has " + std::to_string(product) + " ranks but the communicator has " +
                std::to_string(worldSize_) + "; choose sizes whose product is " + std::to_string(worldSize_));
  // Mixed radix, last dimension fastest.
  coords_.assign(dims_.size(), 0);
  int rest = worldRank_;
  for (int d = ndims() - 1; d >= 0; --d) {
    coords_[d] = rest % dims_[d].second;
    rest /= dims_[d].second;
  }
  for (int d = 0; d < ndims(); ++d) {
    // The color is the rank with this dimension's coordinate zeroed: equal for exactly the ranks
    // that share every other coordinate. The key orders them by their coordinate.
    int stride = 1;
    for (int e = d + 1; e < ndims(); ++e) stride *= dims_[e].second;
    int color = worldRank_ - coords_[d] * stride;
    collComm_t c = nullptr;
    check(collCommSplit(world, color, coords_[d], &c, nullptr), world,
          ("ProcessMesh: collCommSplit for dimension '" + dims_[d].first + "'").c_str());
    comms_.push_back(c);
  }
}

ProcessMesh::~ProcessMesh() {
  for (collComm_t c : comms_) collCommDestroy(c);
}

int ProcessMesh::index(const std::string& name) const {
  for (int d = 0; d < ndims(); ++d)
    if (dims_[d].first == name) return d;
  throw Error("ProcessMesh: no dimension named '" + name + "'");
}

int ProcessMesh::size(const std::string& name) const { return dims_[index(name)].second; }
int ProcessMesh::coord(const std::string& name) const { return coords_[index(name)]; }
collComm_t ProcessMesh::comm(const std::string& name) const { return comms_[index(name)]; }

}  // namespace coll::parallel
