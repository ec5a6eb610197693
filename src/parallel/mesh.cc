#include "coll/parallel/mesh.h"

#include <set>

#include "coll/parallel/error.h"

namespace coll::parallel {

ProcessMesh::ProcessMesh(collComm_t world, std::vector<std::pair<std::string, int>> dims)
    : ProcessMesh(world, std::move(dims), {}) {}

ProcessMesh::ProcessMesh(collComm_t world, std::vector<std::pair<std::string, int>> dims,
                         std::vector<std::vector<std::string>> groups)
    : dims_(std::move(dims)) {
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
  for (const auto& g : groups) {
    if (g.empty()) throw Error("ProcessMesh: an empty group of dimensions; name at least one");
    std::set<std::string> seen;
    for (const std::string& name : g) {
      if (!names.count(name))
        throw Error("ProcessMesh: the group names dimension '" + name + "', which the mesh (" + shape + ") lacks");
      if (!seen.insert(name).second) throw Error("ProcessMesh: a group names dimension '" + name + "' twice");
    }
  }
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
  std::vector<int> stride(ndims(), 1);
  for (int d = ndims() - 2; d >= 0; --d) stride[d] = stride[d + 1] * dims_[d + 1].second;
  for (const auto& g : groups) {
    // As above with several coordinates zeroed; the key orders the group's ranks by their
    // coordinates in the group's order, last fastest.
    int color = worldRank_, key = 0;
    std::string joined;
    for (const std::string& name : g) {
      int d = index(name);
      color -= coords_[d] * stride[d];
      key = key * dims_[d].second + coords_[d];
      joined += (joined.empty() ? "" : "+") + name;
    }
    collComm_t c = nullptr;
    check(collCommSplit(world, color, key, &c, nullptr), world,
          ("ProcessMesh: collCommSplit for group '" + joined + "'").c_str());
    groups_.emplace_back(joined, c);
  }
}

ProcessMesh::~ProcessMesh() {
  for (collComm_t c : comms_) collCommDestroy(c);
  for (auto& g : groups_) collCommDestroy(g.second);
}

int ProcessMesh::index(const std::string& name) const {
  for (int d = 0; d < ndims(); ++d)
    if (dims_[d].first == name) return d;
  throw Error("ProcessMesh: no dimension named '" + name + "'");
}

int ProcessMesh::size(const std::string& name) const { return dims_[index(name)].second; }
int ProcessMesh::coord(const std::string& name) const { return coords_[index(name)]; }
collComm_t ProcessMesh::comm(const std::string& name) const {
  for (const auto& g : groups_)
    if (g.first == name) return g.second;
  return comms_[index(name)];
}

}  // namespace coll::parallel
