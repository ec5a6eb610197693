// A process mesh: the ranks of a communicator arranged as an N-dimensional grid with named
// dimensions (for example pipeline x data x tensor, or replicate x shard), with one communicator
// per dimension for the collectives along it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "coll/coll.h"

namespace coll::parallel {

class ProcessMesh {
 public:
  /// Arranges world's ranks as a grid of `dims` (outermost first; the last dimension varies
  /// fastest with the rank, so it should be the one that communicates most, e.g. tensor parallel
  /// inside a host). For each dimension, the ranks that share every other coordinate form a
  /// communicator (collCommSplit; every rank of world must call this together). Throws Error,
  /// before any communication, when the sizes' product is not world's size, a size is below 1, or
  /// a name repeats.
  ProcessMesh(collComm_t world, std::vector<std::pair<std::string, int>> dims);
  /// As above, and a communicator for each group of several dimensions (e.g. {"dp", "cp"}: the
  /// ranks that differ only along those, for averaging gradients over data and context
  /// parallelism together), named by joining the names with '+' ("dp+cp") for comm().
  ProcessMesh(collComm_t world, std::vector<std::pair<std::string, int>> dims,
              std::vector<std::vector<std::string>> groups);
  ~ProcessMesh();
  ProcessMesh(const ProcessMesh&) = delete;
  ProcessMesh& operator=(const ProcessMesh&) = delete;

  /// Number of dimensions.
  int ndims() const { return static_cast<int>(dims_.size()); }
  /// The size of dimension `name` (Error if there is none).
  int size(const std::string& name) const;
  /// This rank's coordinate along `name`, which is also its rank in comm(name).
  int coord(const std::string& name) const;
  /// The communicator of the ranks that differ from this one only along `name` (a dimension, or a
  /// group given at construction, "dp+cp").
  collComm_t comm(const std::string& name) const;
  /// This rank in world, and world's size.
  int worldRank() const { return worldRank_; }
  int worldSize() const { return worldSize_; }

 private:
  int index(const std::string& name) const;
  std::vector<std::pair<std::string, int>> dims_;
  std::vector<int> coords_;
  std::vector<collComm_t> comms_;
  std::vector<std::pair<std::string, collComm_t>> groups_;
  int worldRank_ = 0, worldSize_ = 1;
};

}  // namespace coll::parallel
