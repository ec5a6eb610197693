// Paths between endpoints of a System, classified as NCCL classifies them, with the bandwidth and
// latency the transports and the tuner use; NIC choice by locality; the order of a ring over
// ranks placed on hosts, NUMA nodes and GPUs.
#pragma once

#include <string>
#include <vector>

#include "topo/system.h"

namespace coll::topo {

/// Closest first.
enum class PathType {
  kLoc,  // the same device (or NUMA node)
  kNvl,  // NVLink, direct or through NVSwitch
  kPix,  // one PCIe switch in common, directly above both
  kPxb,  // PCIe switches in common, not directly above both (no host bridge crossed)
  kPhb,  // through a host bridge (one socket): PCIe to CPU, or NUMA nodes of one package
  kSys,  // across sockets (the inter-socket link)
  kNet,  // different hosts
};

/// "LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NET" (nvidia-smi topo -m's names).
const char* pathName(PathType t);

/// An endpoint: a GPU (by position in System::gpus), a NIC (System::nics) or a NUMA node (its id,
/// for CPU ranks and host memory).
struct Endpoint {
  enum Kind { kGpu, kNic, kNuma } kind = kNuma;
  int index = 0;
};

struct Path {
  PathType type = PathType::kLoc;
  double GBs = 0;  // per direction, the slowest link on the way
  double latencyUs = 0;
};

/// The path between two endpoints of one host.
Path pathBetween(const System& s, Endpoint a, Endpoint b);

/// The path between the GPUs with these PCI bus ids (CUDA's or hwloc's spelling: the domain's
/// width and the letters' case do not matter): kLoc for one GPU, false when either is not a GPU
/// of s.
bool gpuPath(const System& s, const std::string& busA, const std::string& busB, PathType* out);

/// The index in s.nics of the NIC at PCI bus id busId (any case, 4- or 8-digit domain), or of the
/// one whose name or netdev is busId when no bus id matches; -1 when none.
int nicIndexOf(const System& s, const std::string& busId);

/// The PathType named as pathName() names it (case-insensitive); false for anything else.
bool parsePathType(const std::string& name, PathType* out);

/// For every endpoint, the NIC it should use (index into System::nics), -1 when the host has no
/// usable NIC: the closest path first, then the fastest NIC, then spread, so that endpoints
/// with the same choices take different NICs in turn. Virtual and loopback NICs are used only
/// when there is nothing else.
std::vector<int> assignNics(const System& s, const std::vector<Endpoint>& endpoints);

/// Where a rank runs, for ordering rings.
struct RankPlace {
  std::string hostId;
  int package = 0;
  int numa = 0;
  int gpu = -1;  // CUDA device, -1 for CPU ranks
};

/// A ring over the ranks that enters and leaves every host once (hosts in order of their lowest
/// rank), and inside a host goes package by package, NUMA node by NUMA node, GPU by GPU, rank
/// by rank: position i of the result is the rank at ring position i.
std::vector<int> ringOrder(const std::vector<RankPlace>& ranks);

}  // namespace coll::topo
