#include "report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <fstream>

namespace collperf {
namespace {

// nccl-tests' percentileIndex: nearest rank.
size_t percentileIndex(size_t n, size_t percentile) { return std::min(n - 1, (n * percentile + 99) / 100 - 1); }

void printPlacement(FILE* out, const Measure& m, bool perIter) {
  if (m.wrong >= 0)
    std::fprintf(out, "  %7s  %6s  %6s  %6g", floatStr(m.timeUs, 7).c_str(), floatStr(m.algbw, 6).c_str(),
                 floatStr(m.busbw, 6).c_str(), static_cast<double>(m.wrong));
  else
    std::fprintf(out, "  %7s  %6s  %6s    N/A", floatStr(m.timeUs, 7).c_str(), floatStr(m.algbw, 6).c_str(),
                 floatStr(m.busbw, 6).c_str());
  if (perIter)
    std::fprintf(out, "  %7s  %7s  %7s  %7s", floatStr(m.stats.min, 7).c_str(), floatStr(m.stats.max, 7).c_str(),
                 floatStr(m.stats.p99, 7).c_str(), floatStr(m.stats.cvPercent, 7).c_str());
}

}  // namespace

IterStats statsOf(std::vector<double> t) {
  IterStats s;
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  size_t n = t.size();
  s.min = t.front();
  s.max = t.back();
  s.p50 = t[n / 2];
  s.p95 = t[percentileIndex(n, 95)];
  s.p99 = t[percentileIndex(n, 99)];
  double sum = 0, var = 0;
  for (double x : t) sum += x;
  s.avg = sum / static_cast<double>(n);
  for (double x : t) var += (x - s.avg) * (x - s.avg);
  s.stdev = std::sqrt(var / static_cast<double>(n));
  s.cvPercent = s.avg > 0 ? 100.0 * s.stdev / s.avg : 0;
  return s;
}

std::vector<double> packStats(const IterStats& s) {
  return {s.min, s.max, s.avg, s.p50, s.p95, s.p99, s.stdev, s.cvPercent};
}

IterStats unpackStats(const std::vector<double>& v) {
  IterStats s;
  if (v.size() < 8) return s;
  s.min = v[0], s.max = v[1], s.avg = v[2], s.p50 = v[3], s.p95 = v[4], s.p99 = v[5], s.stdev = v[6];
  s.cvPercent = v[7];
  return s;
}

IterStats combineStats(const std::vector<IterStats>& perRank, Across mode) {
  if (perRank.empty()) return {};
  std::vector<double> acc = packStats(perRank[0]);
  if (mode == Across::kRank0) return perRank[0];
  for (size_t r = 1; r < perRank.size(); ++r) {
    std::vector<double> x = packStats(perRank[r]);
    for (size_t i = 0; i < acc.size(); ++i)
      acc[i] = mode == Across::kMin   ? std::min(acc[i], x[i])
               : mode == Across::kMax ? std::max(acc[i], x[i])
                                      : acc[i] + x[i];
  }
  if (mode == Across::kMean)
    for (double& a : acc) a /= static_cast<double>(perRank.size());
  return unpackStats(acc);
}

std::string floatStr(double value, int width) {
  char buf[64];
  for (const char* fmt : {"%*.2f", "%*.1f", "%*.0f"})
    if (std::snprintf(buf, sizeof(buf), fmt, width, value) <= width) return buf;
  std::snprintf(buf, sizeof(buf), width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return buf;
}

void printTableHeader(FILE* out, bool cputime, bool timestamps, bool perIter) {
  const char* ts = timestamps ? "timestamp" : "";
  const int tsPad = timestamps ? 19 : 0;
  const char* tsFmt = timestamps ? "%Y-%m-%d %H:%M:%S" : "";
  const char* time = cputime ? "cputime" : "time";
  std::fprintf(out, "#\n");
  if (perIter) {
    std::fprintf(out,
                 "# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                     "
                 "           in-place (+ per-iteration)\n",
                 "", "", "", "", "");
    std::fprintf(out,
                 "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
                 "%7s  %7s %*s\n",
                 "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99",
                 "i_cv%", time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", tsPad, ts);
    std::fprintf(out,
                 "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
                 "%7s  %7s %*s\n",
                 "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", "(us)",
                 "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", tsPad, tsFmt);
    return;
  }
  std::fprintf(out, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "",
               "", "", "", "");
  std::fprintf(out, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count",
               "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw", "#wrong", tsPad, ts);
  std::fprintf(out, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)",
               "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", tsPad, tsFmt);
}

void printRow(FILE* out, const Row& r, bool perIter) {
  std::fprintf(out, "%12zu  %12zu  %8s  %6s  %6d", r.bytes, r.count, r.type.c_str(), r.redop.c_str(), r.root);
  printPlacement(out, r.oop, perIter);
  printPlacement(out, r.ip, perIter);
  if (!r.timestamp.empty()) std::fprintf(out, "%21s", r.timestamp.c_str());
  std::fprintf(out, "\n");
}

bool writeCsv(const std::string& path, const std::string& collective, int nranks, const std::vector<Row>& rows) {
  std::ofstream f(path);
  if (!f) return false;
  f << "collective,nranks,size,count,type,redop,root,algorithm,iterations";
  for (const char* p : {"oop", "ip"})
    for (const char* c :
         {"time_us", "algbw_GBs", "busbw_GBs", "wrong", "min_us", "max_us", "avg_us", "p99_us", "cv_percent"})
      f << "," << p << "_" << c;
  f << "\n";
  char buf[256];
  for (const Row& r : rows) {
    f << collective << "," << nranks << "," << r.bytes << "," << r.count << "," << r.type << "," << r.redop << ","
      << r.root << "," << r.algorithm << "," << r.iters;
    for (const Measure* m : {&r.oop, &r.ip}) {
      std::snprintf(buf, sizeof(buf), ",%.3f,%.4f,%.4f,%" PRId64 ",%.3f,%.3f,%.3f,%.3f,%.2f", m->timeUs, m->algbw,
                    m->busbw, m->wrong, m->stats.min, m->stats.max, m->stats.avg, m->stats.p99, m->stats.cvPercent);
      f << buf;
    }
    f << "\n";
  }
  return static_cast<bool>(f);
}

}  // namespace collperf
