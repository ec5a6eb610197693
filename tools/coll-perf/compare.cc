#include "compare.h"

#include <map>
#include <tuple>

namespace collperf {
namespace {

bool noisy(const Measure& m) { return m.hasStats && m.stats.cvPercent > kNoisyCvPercent; }

}  // namespace

int printComparison(FILE* out, const Result& a, const Result& b) {
  using Key = std::tuple<size_t, std::string, std::string, int>;
  std::map<Key, const Row*> byKey;
  for (const Row& r : b.rows) byKey[Key{r.bytes, r.type, r.redop, r.root}] = &r;
  std::fprintf(out, "# compare: A = %s, %d ranks (%s)\n#          B = %s, %d ranks (%s)\n", a.collective.c_str(),
               a.nranks, a.args.c_str(), b.collective.c_str(), b.nranks, b.args.c_str());
  if (a.collective != b.collective) std::fprintf(out, "# warning: different collectives\n");
  std::fprintf(out, "# %10s  %8s  %6s  %5s  %10s  %10s  %7s  %10s  %10s  %7s  %6s  %6s\n", "size", "type", "redop",
               "root", "A busbw", "B busbw", "B/A", "A time", "B time", "B/A", "A cv%", "B cv%");
  int matched = 0, flagged = 0;
  for (const Row& ra : a.rows) {
    auto it = byKey.find(Key{ra.bytes, ra.type, ra.redop, ra.root});
    if (it == byKey.end()) continue;
    const Row& rb = *it->second;
    auto ratio = [](double x, double y) { return x > 0 ? y / x : 0.0; };
    auto cv = [](const Measure& m) { return m.hasStats ? floatStr(m.stats.cvPercent, 6) : std::string("     -"); };
    bool isNoisy = noisy(ra.oop) || noisy(rb.oop);
    flagged += isNoisy;
    std::fprintf(out, "  %10zu  %8s  %6s  %5d  %10.3f  %10.3f  %6.2fx  %10.2f  %10.2f  %6.2fx  %6s  %6s%s\n", ra.bytes,
                 ra.type.c_str(), ra.redop.c_str(), ra.root, ra.oop.busbw, rb.oop.busbw,
                 ratio(ra.oop.busbw, rb.oop.busbw), ra.oop.timeUs, rb.oop.timeUs, ratio(ra.oop.timeUs, rb.oop.timeUs),
                 cv(ra.oop).c_str(), cv(rb.oop).c_str(), isNoisy ? "  noisy" : "");
    ++matched;
  }
  if (matched == 0) std::fprintf(out, "# no size, type, redop and root in common\n");
  // Two single runs differ by more than the change under study surprisingly often on a shared machine:
  // say so where nothing in the files measures the spread, or where the spread is large.
  if (matched > 0 && (!a.perIter || !b.perIter))
    std::fprintf(out,
                 "# warning: %s no per-iteration statistics (run with -I 1): each file is one run with no measure of "
                 "its spread, so these ratios are noise-prone; repeat the runs and compare medians\n",
                 !a.perIter && !b.perIter ? "A and B have" : (!a.perIter ? "A has" : "B has"));
  if (flagged > 0)
    std::fprintf(out,
                 "# warning: %d of %d rows have a per-iteration cv above %.0f%% (marked noisy): their ratios are "
                 "noise-prone\n",
                 flagged, matched, kNoisyCvPercent);
  return matched;
}

}  // namespace collperf
