// Co-residency of the device kernels: every rank's kernel of one operation must be running at once
// (each waits for its peers' kernels), so the CTAs that all ranks sharing a GPU launch together must
// fit what the GPU holds at once: its SMs times the interpreter's occupancy (one 512-thread CTA of
// up to 128 registers per SM). A launch that does not fit never starts its last CTAs while the first
// ones spin: it would wait until the timeout. So:
//  - every rank tells its GPU's capacity at init (bootstrap::RankInfo::gpuCtas), and every rank
//    computes the same budget from the table: the least capacity / ranks-on-that-GPU over the GPUs;
//  - a collective's channels (one CTA each) are at most the budget;
//  - a send's or receive's channels are capped so that a group that sends to and receives from
//    every rank, itself included, fits; both ends compute the same split;
//  - a launch that still needs more (a group with more peers than the budget holds) is refused
//    with a sentence that names the counts, before anything is launched.
// Other work on the GPU (a framework's kernels, another communicator's) is not counted.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bootstrap/bootstrap_wire.h"

namespace coll {

/// The CTAs one rank of a communicator may have in one launch.
struct CtaBudget {
  bool known = false;  // some rank told its GPU's capacity; false for host-only ranks
  int perRank = 0;     // 0: a GPU holds fewer CTAs than ranks of this communicator share it
  // The GPU that sets the budget: its capacity, the ranks that share it, one of them.
  int gpuCtas = 0;
  int ranksOnGpu = 0;
  int rank = -1;
};

/// From the ranks' table: ranks grouped by (host, CUDA device); the least capacity / ranks.
CtaBudget ctaBudget(const std::vector<bootstrap::RankInfo>& ranks);

/// Channels of one send or receive of `bytes`: a collective's split (channelsFor) capped at
/// perRank / (2 x nranks), at least 1. Every input is the same on both ends, so they split alike.
int p2pChannels(size_t bytes, int nranks, int maxChannels, size_t minBytes, const CtaBudget& b);

/// Why a launch of `ctas` CTAs on this rank cannot be co-resident with its peers' ("" when it fits).
std::string residencyProblem(const char* opName, int ctas, const CtaBudget& b);

/// What the GPU `device` holds at once of the interpreter kernel at `threads` threads per CTA: SMs
/// times CTAs per SM (loading every kernel: none is loaded at a first launch). 0 for a host-only
/// rank (device < 0), where there is no device runtime, or where CUDA cannot tell (then why says).
int gpuCtas(int device, int threads, std::string* why);

}  // namespace coll
