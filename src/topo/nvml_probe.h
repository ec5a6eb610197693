// NVLink discovery through NVML (libnvidia-ml.so.1, shipped with the driver) loaded at run time,
// so that libcoll loads on machines without a GPU driver. Fails soft: no NVML or no NVLink is a
// reason string, never an error.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace coll::topo {

struct NvLinks {
  int switchLinks = 0;                                // active links to NVSwitches
  std::vector<std::pair<std::string, int>> gpuPeers;  // bus id of a GPU at the other end -> links
  double GBsPerLink = 0;                              // per direction, from the NVLink version
};

/// The active NVLinks of the GPU with this PCI bus id ("0000:3b:00.0"). False, with why set,
/// when NVML is missing, does not know the GPU, or the GPU has no NVLink.
bool nvlinksOf(const std::string& busId, NvLinks* out, std::string* why);

/// "0000:3b:00.0" from NVML's or CUDA's spellings ("00000000:3B:00.0"): lower case, 4-digit domain.
std::string normalizeBusId(const std::string& busId);

}  // namespace coll::topo
