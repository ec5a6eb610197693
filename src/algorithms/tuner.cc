#include "algorithms/tuner.h"

#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "algorithms/fold.h"

namespace coll::algorithms {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  return out;
}

// NCCL's list syntax, "a,b" (only these) or "^a,b" (all but these), over count names matched
// case-insensitively: a mask of their indices. `what` names the kind for the error.
bool parseList(const std::string& list, const char* const* names, int count, const char* what, uint32_t* mask,
               std::string* error) {
  std::string body = list;
  bool exclude = !body.empty() && body[0] == '^';
  if (exclude) body = body.substr(1);
  uint32_t m = 0;
  for (const std::string& name : split(body, ',')) {
    int i = 0;
    while (i < count && strcasecmp(name.c_str(), names[i]) != 0) ++i;
    if (i == count) {
      *error = std::string("unknown ") + what + " '" + name + "' (known:";
      for (int k = 0; k < count; ++k) *error += std::string(k ? ", " : " ") + names[k];
      *error += ")";
      return false;
    }
    m |= 1u << i;
  }
  *mask = exclude ? ~m : m;
  return true;
}

// The schedule algorithms' names, then "window" (kWindowBit).
bool parseAlgorithms(const std::string& list, uint32_t* mask, std::string* error) {
  const char* names[kNumAlgorithms + 1];
  for (int a = 0; a < kNumAlgorithms; ++a) names[a] = algorithmName(static_cast<Algorithm>(a));
  names[kWindowBit] = "window";
  return parseList(list, names, kNumAlgorithms + 1, "algorithm", mask, error);
}

constexpr uint32_t kWindowMask = 1u << kWindowBit;
constexpr uint32_t kScheduleMask = kWindowMask - 1;

struct Shape {
  double steps = 0;    // hops on the critical path
  double sent = 0;     // bytes this rank sends (critical path)
  double reduced = 0;  // bytes this rank reduces
};

double log2ceil(int n) { return n <= 1 ? 0 : std::ceil(std::log2(static_cast<double>(n))); }

Shape shapeOf(Algorithm a, Collective c, int n, double bytes, const CostModel& m) {
  Shape s;
  double nn = n;
  Fold f(n);
  double p = f.p, lp = std::log2(p), fold = f.rem > 0 ? 1 : 0;
  // The vector a reduction or gather works on.
  double v = (c == Collective::kReduceScatter || c == Collective::kAllGather) ? bytes * nn : bytes;
  double piece = std::min<double>(static_cast<double>(m.pieceBytes), v);
  switch (a) {
    case Algorithm::kRing: {
      double rounds = std::max(1.0, std::ceil(v / (nn * static_cast<double>(m.chunkBytes))));
      double phases = c == Collective::kAllReduce ? 2 : 1;
      s.steps = phases * (nn - 1) * rounds;
      s.sent = phases * (nn - 1) / nn * v;
      s.reduced = c == Collective::kAllGather ? 0 : (nn - 1) / nn * v;
      break;
    }
    case Algorithm::kChain:
      s.steps = nn - 1;
      s.sent = v + (nn - 2 > 0 ? (nn - 2) * piece : 0);  // the pipeline fills one piece per hop
      s.reduced = c == Collective::kReduce ? v : 0;
      break;
    case Algorithm::kTree:
      if (c == Collective::kAllReduce) {
        double chunks = std::max(1.0, std::ceil(v / 2 / static_cast<double>(m.chunkBytes / 2)));
        s.steps = 2 * log2ceil(n) + 2 * (chunks - 1);
        s.sent = 2 * v;
        s.reduced = v;
      } else {
        s.steps = log2ceil(n);
        s.sent = log2ceil(n) * v;  // store and forward: every level waits for the whole message
        s.reduced = c == Collective::kReduce ? log2ceil(n) * v : 0;
      }
      break;
    case Algorithm::kRhd: {
      double phases = c == Collective::kAllReduce ? 2 : 1;
      s.steps = phases * lp + 2 * fold;
      s.sent = phases * (p - 1) / p * v + fold * 2 * v;
      s.reduced = (c == Collective::kAllGather ? 0 : (p - 1) / p * v + fold * v) +
                  (c == Collective::kReduceScatter ? 2 * v : 0);  // working copy in and out of scratch
      break;
    }
    case Algorithm::kRd:
      s.steps = lp + 2 * fold;
      s.sent = lp * v + fold * 2 * v;
      s.reduced = lp * v + fold * v;
      break;
    case Algorithm::kExchange:
      s.steps = nn - 1;
      s.sent = (nn - 1) * v;
      s.reduced = (nn - 1) * v;
      break;
    case Algorithm::kPairwise:
      s.steps = nn - 1;
      s.sent = (nn - 1) * bytes;
      break;
    case Algorithm::kHier:
      break;  // costed apart (predictUs): it mixes two kinds of links
  }
  return s;
}

}  // namespace

// Fitted to perf/results/20261121-081304-tuner and 20261121-082935-tuner (all-reduce, every
// algorithm forced, 2, 4 and 8 ranks on the 2-core CI VM, 8 B to 256 MiB, 5 repeats in all) with
// `NPS="2 4 8" perf/tune_allreduce.py --fit --refit <both folders>`: Powell's method on the
// squared log error of the prediction (rms 0.25, i.e. about 30% per point). Chain, pairwise and
// hier keep weight 1: they were not part of the fit.
CostModel shmModel() {
  CostModel m;
  m.alphaUs = 0.556;
  m.switchUs = 1.6;
  m.betaGBs = 10.2;
  m.gammaGBs = 9.34;
  m.contention = 1.05;
  const double step[] = {0.589, 1, 1.12, 0.822, 1.48, 1.44, 1, 1};
  const double bw[] = {0.89, 1, 0.97, 1.29, 0.808, 0.951, 1, 1};
  for (int a = 0; a < kNumAlgorithms; ++a) {
    m.stepWeight[a] = step[a];
    m.bwWeight[a] = bw[a];
  }
  // The windows path: fitted by perf/fit_windows.py to perf/results/20261129-003153-windows (all
  // six collectives forced onto windows and off them, 2 and 4 ranks, 8 B to 64 MiB, 3 rounds) and
  // 20261129-072729-windows (reduce, all-gather and reduce-scatter, 2 KiB to 256 KiB, where the
  // choice changes, 7 rounds), first so that no measured point takes the path where it ran more
  // than 5% slower than the FIFOs, then to lose the least time in the choice (regret 12.3 over 333
  // points, against 259 for always and 422 for never taking it). The bandwidth weight is per
  // collective: the FIFO algorithm it competes with differs (a reduce's tree is cheap at 32 KiB on
  // 4 ranks, where the path's arrivals wait for every rank to be scheduled). The times themselves
  // fit poorly (rms log error 1.5): the FIFO model overpredicts small calls on that machine, and
  // the fit pays for it with a high arrival cost.
  m.windowAlphaUs = 0.45;
  m.windowStepWeight = 6.25;
  const double windowBw[kNumCollectives] = {0.15, 0.75, 0.40, 0.55, 1.55, 0.05};
  for (int c = 0; c < kNumCollectives; ++c) m.windowBwWeight[c] = windowBw[c];
  return m;
}

// TCP: measured with 2 ranks over loopback (COLL_SHM_DISABLE=1, each algorithm forced, 8 B to
// 16 MiB; figures in perf/results/20261121-084532/README-tcp-weights.md): one step costs about
// 5 us, a ring moves about 2.6 GB/s per rank, and the other algorithms take 1.04x to 1.75x the
// ring's time at 512 KiB to 16 MiB, which the bandwidth weights carry. Not fitted over more ranks.
CostModel tcpModel() {
  CostModel m = shmModel();
  m.alphaUs = 5;
  m.betaGBs = 2.6;
  m.gammaGBs = 9.34;
  for (double& w : m.stepWeight) w = 1;
  const double bw[] = {1, 1, 1, 1.15, 1.27, 1.5, 1, 1};  // tree: 1, not 0.65 (2 ranks only), so as
  // not to claim it beats the ring over more ranks, which was not measured
  for (int a = 0; a < kNumAlgorithms; ++a) m.bwWeight[a] = bw[a];
  return m;
}

namespace {

// NCCL's algorithms that coll does not have: a ported NCCL_ALGO value naming them is not a typo.
bool ncclOnlyAlgorithm(const std::string& name) {
  for (const char* n : {"nvls", "nvlstree", "collnet", "collnetdirect", "collnetchain", "pat"})
    if (strcasecmp(name.c_str(), n) == 0) return true;
  return false;
}

// Drops NCCL-only names from a list ("ring,NVLS" -> "ring"), noting them; "" if none is left.
std::string withoutNcclOnly(const std::string& list, std::string* notes) {
  bool exclude = !list.empty() && list[0] == '^';
  std::string kept;
  for (const std::string& name : split(exclude ? list.substr(1) : list, ',')) {
    if (ncclOnlyAlgorithm(name)) {
      *notes += "NCCL's " + name + " does not exist in coll (ignored); ";
      continue;
    }
    kept += (kept.empty() ? "" : ",") + name;
  }
  return kept.empty() ? "" : (exclude ? "^" : "") + kept;
}

bool anyFor(const AlgoFilter& f, Collective c) {
  for (Algorithm a : algorithmsFor(c))
    if (f.permits(c, a)) return true;
  return false;
}

std::string namesFor(Collective c) {
  std::string out;
  for (Algorithm a : algorithmsFor(c)) out += (out.empty() ? "" : ", ") + std::string(algorithmName(a));
  return out;
}

// A list that names the windows path and no schedule algorithm: the path is forced where the
// buffers allow it, and the collective keeps its schedule algorithms for other buffers.
bool forcesWindowOnly(uint32_t mask) { return (mask & kWindowMask) && !(mask & kScheduleMask); }

void forceWindow(AlgoFilter* f, int c) {
  f->allowed[c] |= kWindowMask;
  f->windowForced[c] = true;
}

}  // namespace

bool parseAlgoSpec(const std::string& spec, AlgoFilter* out, std::string* error, std::string* notes) {
  AlgoFilter f;
  std::string text = trim(spec), ignored;
  if (!notes) notes = &ignored;
  notes->clear();
  if (text.empty()) return *out = f, true;
  for (const std::string& part : split(text, ';')) {
    if (part.empty()) continue;
    size_t colon = part.find(':');
    std::string list = withoutNcclOnly(trim(colon == std::string::npos ? part : part.substr(colon + 1)), notes);
    if (list.empty()) continue;  // only NCCL-only names: nothing to restrict
    uint32_t mask;
    if (!parseAlgorithms(list, &mask, error)) return false;
    if (colon == std::string::npos) {
      // A list for every collective applies where it can, as NCCL_ALGO does: a collective that has
      // none of these algorithms keeps its own (broadcast under "ring" keeps chain and tree).
      for (int c = 0; c < kNumCollectives; ++c) {
        if (forcesWindowOnly(mask)) {
          forceWindow(&f, c);
          continue;
        }
        AlgoFilter narrowed = f;
        narrowed.allowed[c] &= mask;
        if (anyFor(narrowed, static_cast<Collective>(c)))
          f.allowed[c] = narrowed.allowed[c];
        else
          *notes += fmt::format("{} has none of '{}' and keeps its own ({}); ",
                                collectiveName(static_cast<Collective>(c)), list, namesFor(static_cast<Collective>(c)));
      }
      continue;
    }
    Collective c;
    std::string name = trim(part.substr(0, colon));
    if (!collectiveFromName(name, &c)) {
      *error =
          "unknown collective '" + name + "' (known: allreduce, reducescatter, allgather, broadcast, reduce, alltoall)";
      return false;
    }
    if (forcesWindowOnly(mask)) {
      forceWindow(&f, static_cast<int>(c));
      continue;
    }
    f.allowed[static_cast<int>(c)] = mask;
    f.windowForced[static_cast<int>(c)] = false;
    // Named explicitly: leaving it nothing is a mistake to report, not to paper over.
    if (!anyFor(f, c)) {
      *error = std::string("leaves ") + collectiveName(c) + " with no algorithm (it can use: " + namesFor(c) + ")";
      return false;
    }
  }
  if (notes->size() >= 2) notes->resize(notes->size() - 2);
  *out = f;
  return true;
}

// Several hosts: every step of a flat algorithm waits for the slowest link, a network one; the
// hierarchical all-reduce pays network costs only for its middle phase, with 1/L of the data per
// rank and the L ranks of a host sending side by side. (When the hosts share one machine's cores,
// oversubscription counts the whole machine's ranks, so both grow alike: measured on network
// namespaces, the flat ring and the hierarchical algorithm with its smaller chunk then run within
// a few percent of each other at large sizes, and the latter is faster below, as modelled.)
double multiHostUs(Algorithm a, Collective c, int n, double bytes, const CostModel& m) {
  CostModel net = m;
  net.alphaUs = m.netAlphaUs;
  net.betaGBs = m.netBetaGBs;
  net.oversubscription = 1;
  double over = std::pow(std::max(1.0, m.oversubscription), m.contention);
  if (a != Algorithm::kHier) {
    Shape s = shapeOf(a, c, n, bytes, net);
    double work = s.sent / net.betaGBs / 1e3 + s.reduced / m.gammaGBs / 1e3;
    return s.steps * net.alphaUs + work * m.bwWeight[static_cast<int>(a)] * over;
  }
  double L = m.ranksPerHost, H = m.hosts;
  double inside =
      2 * (L - 1) * m.alphaUs + 2 * (L - 1) / L * bytes / m.betaGBs / 1e3 + (L - 1) / L * bytes / m.gammaGBs / 1e3;
  double across = 2 * (H - 1) * net.alphaUs + 2 * (H - 1) / H * bytes / L / net.betaGBs / 1e3 +
                  (H - 1) / H * bytes / L / m.gammaGBs / 1e3;
  return (inside + across) * over;
}

namespace {

// Whether nranks ranks form hosts of the same size (two or more ranks each, numbered host by
// host), as the hierarchical algorithm and the windows path across hosts need.
bool hostsUniform(const CostModel& m, int nranks) {
  return m.hosts > 1 && m.ranksPerHost > 1 && m.ranksPerHost * m.hosts == nranks;
}

}  // namespace

double predictUs(Algorithm a, Collective c, int nranks, size_t bytes, const CostModel& m) {
  if (nranks <= 1 || bytes == 0) return 0;
  if (a == Algorithm::kHier && !hostsUniform(m, nranks)) return HUGE_VAL;  // one host, or ranks not host by host
  if (m.hosts > 1) return multiHostUs(a, c, nranks, static_cast<double>(bytes), m);
  Shape s = shapeOf(a, c, nranks, static_cast<double>(bytes), m);
  double over = std::max(1.0, m.oversubscription);
  double alpha = m.alphaUs + m.switchUs * (over - 1) * m.stepWeight[static_cast<int>(a)];
  // GB/s is bytes per ns: bytes / (GB/s) / 1000 is microseconds. With more ranks than cores, every
  // rank's copies and reductions share the cores: this rank's work takes `over` times longer.
  double work = s.sent / m.betaGBs / 1e3 + s.reduced / m.gammaGBs / 1e3;
  return s.steps * alpha + work * m.bwWeight[static_cast<int>(a)] * std::pow(over, m.contention);
}

namespace {

// The windows path across hosts (all-reduce only): each host's ranks sum their blocks through
// the windows (one arrival), the ranks with one local index ring-all-reduce their block between
// the hosts, and the host's ranks copy every finished block into every output (two arrivals).
double hostWindowsUs(Collective c, int nranks, double b, const CostModel& m) {
  if (c != Collective::kAllReduce || !hostsUniform(m, nranks)) return HUGE_VAL;
  double L = m.ranksPerHost, H = m.hosts;
  double over = std::max(1.0, m.oversubscription);
  double alpha = m.windowAlphaUs + m.switchUs * (over - 1) * m.windowStepWeight;
  double inside = (b / L + (L - 1) / L * b) / m.betaGBs / 1e3 + (L - 1) / L * b / m.gammaGBs / 1e3;
  double across = 2 * (H - 1) * m.netAlphaUs + 2 * (H - 1) / H * b / L / m.netBetaGBs / 1e3 +
                  (H - 1) / H * b / L / m.gammaGBs / 1e3;
  return 3 * alpha + (inside * m.windowBwWeight[static_cast<int>(c)] + across) * std::pow(over, m.contention);
}

}  // namespace

double predictWindowUs(Collective c, int nranks, size_t bytes, const CostModel& m) {
  if (nranks <= 1 || bytes == 0) return 0;
  if (m.hosts > 1) return hostWindowsUs(c, nranks, static_cast<double>(bytes), m);
  double n = nranks, b = static_cast<double>(bytes), copied = 0, reduced = 0;
  // Per rank: its block (1/n of the vector) read from every rank and written to every output
  // that needs it. bytes is NCCL's count x type size (a rank's block for reduce-scatter and
  // all-gather, one peer's block for all-to-all).
  switch (c) {
    case Collective::kAllReduce:
      copied = b, reduced = (n - 1) / n * b;
      break;
    case Collective::kReduceScatter:
      copied = b, reduced = (n - 1) * b;
      break;
    case Collective::kAllGather:
    case Collective::kAllToAll:
      copied = n * b;
      break;
    case Collective::kBroadcast:
      copied = b;
      break;
    case Collective::kReduce:
      copied = b / n, reduced = (n - 1) / n * b;
      break;
  }
  double over = std::max(1.0, m.oversubscription);
  double alpha = m.windowAlphaUs + m.switchUs * (over - 1) * m.windowStepWeight;
  double work = copied / m.betaGBs / 1e3 + reduced / m.gammaGBs / 1e3;
  return 2 * alpha + work * m.windowBwWeight[static_cast<int>(c)] * std::pow(over, m.contention);
}

bool chooseAlgorithm(Collective c, int nranks, size_t bytes, const CostModel& m, const AlgoFilter& f, Algorithm* out) {
  bool found = false;
  double best = 0;
  for (Algorithm a : algorithmsFor(c)) {
    if (!f.permits(c, a)) continue;
    double t = predictUs(a, c, nranks, bytes, m);
    if (!found || t < best) {
      best = t;
      *out = a;
      found = true;
    }
  }
  return found;
}

bool choosePlan(Collective c, int nranks, size_t bytes, const CostModel& m, const AlgoFilter& f, const ProtoSet& p,
                Plan* out) {
  Plan plan;
  if (!chooseAlgorithm(c, nranks, bytes, m, f, &plan.algorithm)) return false;
  plan.chunkBytes = m.chunkBytes;
  if (plan.algorithm == Algorithm::kHier) plan.chunkBytes = std::min(m.chunkBytes, m.hierChunkBytes);
  // The largest piece a step moves: rings and the hierarchical algorithm move a block per rank,
  // halving-doubling half the vector at first, the others the whole vector.
  size_t n = static_cast<size_t>(std::max(1, nranks));
  size_t vector = (c == Collective::kReduceScatter || c == Collective::kAllGather) ? bytes * n : bytes;
  size_t step = vector;
  if (plan.algorithm == Algorithm::kRing || plan.algorithm == Algorithm::kHier) step = (vector + n - 1) / n;
  if (plan.algorithm == Algorithm::kRhd) step = (vector + 1) / 2;
  if (c == Collective::kAllToAll) step = bytes;
  plan.ll = p.ll && step <= kLLBytes;
  size_t output = c == Collective::kAllGather || c == Collective::kAllToAll ? bytes * n : bytes;
  plan.direct = p.direct && output <= m.directMaxBytes;
  *out = plan;
  return true;
}

const char* protocolName(const Plan& p) {
  if (p.ll) return "LL";
  return p.direct ? "Simple+Direct" : "Simple";
}

bool parseProtoSpec(const std::string& spec, ProtoSet* out, std::string* error, std::string* notes) {
  ProtoSet p;
  std::string text = trim(spec), ignored;
  if (!notes) notes = &ignored;
  notes->clear();
  if (!text.empty()) {
    // LL128 is NCCL's; a ported NCCL_PROTO naming it means "the small-message protocol" here too.
    std::string list;
    bool exclude = text[0] == '^';
    for (const std::string& name : split(exclude ? text.substr(1) : text, ',')) {
      bool ll128 = strcasecmp(name.c_str(), "LL128") == 0;
      if (ll128) *notes += "NCCL's LL128 is taken as LL; ";
      list += (list.empty() ? "" : ",") + (ll128 ? std::string("LL") : name);
    }
    static const char* const kNames[] = {"LL", "Simple", "Direct"};
    uint32_t mask;
    if (!parseList((exclude ? "^" : "") + list, kNames, 3, "protocol", &mask, error)) return false;
    // Simple carries every piece that neither LL nor Direct can take (LL only fits 56 bytes), so
    // a list without it still applies where it can: "LL" means LL for small pieces, Simple beyond.
    if (!(mask & 2u)) *notes += "Simple stays on for pieces LL and Direct cannot carry; ";
    p.ll = mask & 1u;
    p.direct = mask & 4u;
  }
  if (notes->size() >= 2) notes->resize(notes->size() - 2);
  *out = p;
  return true;
}

}  // namespace coll::algorithms
