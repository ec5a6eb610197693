#include "report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "tools_common.h"

namespace collperf {
namespace {

std::string wrongText(int64_t w) { return w < 0 ? "N/A" : std::to_string(w); }

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

std::string measureJson(const Measure& m) {
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "{\"time_us\": %.3f, \"algbw_GBs\": %.4f, \"busbw_GBs\": %.4f, \"wrong\": %" PRId64
                ", \"min_us\": %.3f, \"max_us\": %.3f, \"p99_us\": %.3f, \"cv_percent\": %.2f}",
                m.timeUs, m.algbw, m.busbw, m.wrong, m.stats.min, m.stats.max, m.stats.p99, m.stats.cvPercent);
  return buf;
}

// The text after "key": in line, or "" (our own one-object-per-line format only).
std::string field(const std::string& line, const std::string& key, size_t from = 0) {
  size_t k = line.find("\"" + key + "\":", from);
  if (k == std::string::npos) return "";
  size_t v = k + key.size() + 3;
  while (v < line.size() && line[v] == ' ') ++v;
  if (v < line.size() && line[v] == '"') {
    size_t end = line.find('"', v + 1);
    return line.substr(v + 1, end - v - 1);
  }
  size_t end = line.find_first_of(",}", v);
  return line.substr(v, end - v);
}

void readMeasure(const std::string& line, const char* key, Measure* m) {
  size_t at = line.find(std::string("\"") + key + "\":");
  if (at == std::string::npos) return;
  m->timeUs = std::atof(field(line, "time_us", at).c_str());
  m->algbw = std::atof(field(line, "algbw_GBs", at).c_str());
  m->busbw = std::atof(field(line, "busbw_GBs", at).c_str());
  m->wrong = std::atoll(field(line, "wrong", at).c_str());
}

}  // namespace

IterStats statsOf(std::vector<double> t) {
  IterStats s;
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  s.min = t.front();
  s.max = t.back();
  size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(t.size())));
  s.p99 = t[std::max<size_t>(rank, 1) - 1];
  double mean = 0, var = 0;
  for (double x : t) mean += x;
  mean /= static_cast<double>(t.size());
  for (double x : t) var += (x - mean) * (x - mean);
  var /= static_cast<double>(t.size());
  s.cvPercent = mean > 0 ? 100.0 * std::sqrt(var) / mean : 0;
  return s;
}

void printTableHeader(FILE* out) {
  std::fprintf(out, "#\n#%78s%38s\n", "out-of-place", "in-place");
  std::fprintf(out, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type",
               "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::fprintf(out, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "",
               "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

void printRow(FILE* out, const Row& r) {
  std::fprintf(out, "  %10zu  %12zu  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6s  %7s  %6.2f  %6.2f  %6s\n", r.bytes, r.count,
               r.type.c_str(), r.redop.c_str(), r.root, colltools::formatTime(r.oop.timeUs).c_str(), r.oop.algbw,
               r.oop.busbw, wrongText(r.oop.wrong).c_str(), colltools::formatTime(r.ip.timeUs).c_str(), r.ip.algbw,
               r.ip.busbw, wrongText(r.ip.wrong).c_str());
}

bool writeJson(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  std::ofstream f(path);
  if (!f) return false;
  f << "{\"tool\": \"coll-perf\", \"version\": " << info.version << ", \"collective\": " << jsonString(info.collective)
    << ", \"nranks\": " << info.nranks << ", \"transports\": " << jsonString(info.transports)
    << ", \"args\": " << jsonString(info.args) << ",\n \"results\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << "  {\"size\": " << r.bytes << ", \"count\": " << r.count << ", \"type\": " << jsonString(r.type)
      << ", \"redop\": " << jsonString(r.redop) << ", \"root\": " << r.root
      << ", \"algorithm\": " << jsonString(r.algorithm) << ", \"out_of_place\": " << measureJson(r.oop)
      << ", \"in_place\": " << measureJson(r.ip) << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  f << " ]}\n";
  return static_cast<bool>(f);
}

bool writeCsv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  std::ofstream f(path);
  if (!f) return false;
  f << "collective,nranks,size,count,type,redop,root,algorithm";
  for (const char* p : {"oop", "ip"})
    for (const char* c : {"time_us", "algbw_GBs", "busbw_GBs", "wrong", "min_us", "max_us", "p99_us", "cv_percent"})
      f << "," << p << "_" << c;
  f << "\n";
  char buf[256];
  for (const Row& r : rows) {
    f << info.collective << "," << info.nranks << "," << r.bytes << "," << r.count << "," << r.type << "," << r.redop
      << "," << r.root << "," << r.algorithm;
    for (const Measure* m : {&r.oop, &r.ip}) {
      std::snprintf(buf, sizeof(buf), ",%.3f,%.4f,%.4f,%" PRId64 ",%.3f,%.3f,%.3f,%.2f", m->timeUs, m->algbw, m->busbw,
                    m->wrong, m->stats.min, m->stats.max, m->stats.p99, m->stats.cvPercent);
      f << buf;
    }
    f << "\n";
  }
  return static_cast<bool>(f);
}

bool readJson(const std::string& path, RunInfo* info, std::vector<Row>* rows, std::string* error) {
  std::ifstream f(path);
  if (!f) return *error = "cannot open " + path, false;
  std::string line;
  bool header = false;
  while (std::getline(f, line)) {
    if (line.find("\"tool\": \"coll-perf\"") != std::string::npos) {
      header = true;
      info->collective = field(line, "collective");
      info->nranks = std::atoi(field(line, "nranks").c_str());
      info->transports = field(line, "transports");
      info->args = field(line, "args");
      continue;
    }
    if (line.find("\"size\":") == std::string::npos) continue;
    Row r;
    r.bytes = std::strtoull(field(line, "size").c_str(), nullptr, 10);
    r.count = std::strtoull(field(line, "count").c_str(), nullptr, 10);
    r.type = field(line, "type");
    r.redop = field(line, "redop");
    r.root = std::atoi(field(line, "root").c_str());
    r.algorithm = field(line, "algorithm");
    readMeasure(line, "out_of_place", &r.oop);
    readMeasure(line, "in_place", &r.ip);
    rows->push_back(r);
  }
  if (!header) return *error = path + " is not a coll-perf JSON result (written with -J)", false;
  return true;
}

int printComparison(FILE* out, const RunInfo& baseInfo, const std::vector<Row>& base, const RunInfo& nextInfo,
                    const std::vector<Row>& next) {
  using Key = std::tuple<size_t, std::string, std::string, int>;
  std::map<Key, const Row*> byKey;
  for (const Row& r : next) byKey[Key{r.bytes, r.type, r.redop, r.root}] = &r;
  std::fprintf(out, "# compare: A = %s, %d ranks (%s)\n#          B = %s, %d ranks (%s)\n", baseInfo.collective.c_str(),
               baseInfo.nranks, baseInfo.args.c_str(), nextInfo.collective.c_str(), nextInfo.nranks,
               nextInfo.args.c_str());
  if (baseInfo.collective != nextInfo.collective) std::fprintf(out, "# warning: different collectives\n");
  std::fprintf(out, "# %10s  %8s  %6s  %5s  %10s  %10s  %7s  %10s  %10s  %7s\n", "size", "type", "redop", "root",
               "A busbw", "B busbw", "B/A", "A time", "B time", "B/A");
  int matched = 0;
  for (const Row& a : base) {
    auto it = byKey.find(Key{a.bytes, a.type, a.redop, a.root});
    if (it == byKey.end()) continue;
    const Row& b = *it->second;
    auto ratio = [](double x, double y) { return x > 0 ? y / x : 0.0; };
    std::fprintf(out, "  %10zu  %8s  %6s  %5d  %10.3f  %10.3f  %6.2fx  %10.2f  %10.2f  %6.2fx\n", a.bytes,
                 a.type.c_str(), a.redop.c_str(), a.root, a.oop.busbw, b.oop.busbw, ratio(a.oop.busbw, b.oop.busbw),
                 a.oop.timeUs, b.oop.timeUs, ratio(a.oop.timeUs, b.oop.timeUs));
    ++matched;
  }
  if (matched == 0) std::fprintf(out, "# no size, type, redop and root in common\n");
  return matched;
}

}  // namespace collperf
