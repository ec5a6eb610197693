#include "json_report.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

namespace collperf {
namespace {

using Json = nlohmann::ordered_json;  // ordered: keys come out in nccl-tests' order

constexpr int kJsonFileVersion = 3;  // nccl-tests' JSON_FILE_VERSION

Json placementJson(const Measure& m, bool cputime) {
  Json j;
  j[cputime ? "cpu_time" : "time"] = m.timeUs;
  j["alg_bw"] = m.algbw;
  j["bus_bw"] = m.busbw;
  j["nwrong"] = m.wrong >= 0 ? Json(static_cast<double>(m.wrong)) : Json(nullptr);
  if (m.hasDevice)
    j["device_timing"] = Json{{"launches", m.launches},         {"channels_per_launch", m.channels},
                              {"kernel_us", m.kernelUs},        {"first_piece_us", m.firstPieceUs},
                              {"last_piece_us", m.lastPieceUs}, {"recv_poll_us", m.recvPollUs},
                              {"send_poll_us", m.sendPollUs},   {"fence_us", m.fenceUs}};
  return j;
}

Json perIterJson(const Measure& m) {
  const IterStats& s = m.stats;
  return Json{{"skipped_iterations", m.skipped},
              {"min_us", s.min},
              {"max_us", s.max},
              {"avg_us", s.avg},
              {"p50_us", s.p50},
              {"p95_us", s.p95},
              {"p99_us", s.p99},
              {"stdev_us", s.stdev},
              {"cv_pct", s.cvPercent},
              {"times_us", m.times}};
}

double number(const Json& j, const char* key, double otherwise = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : otherwise;
}

std::string text(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// One placement in either layout: nccl-tests' (time or cpu_time, alg_bw, bus_bw, nwrong) or the old
// coll-perf one (time_us, algbw_GBs, busbw_GBs, wrong, cv_percent).
Measure readPlacement(const Json& row, const char* key, bool* perIter) {
  Measure m;
  auto it = row.find(key);
  if (it == row.end() || !it->is_object()) return m;
  const Json& p = *it;
  m.timeUs = p.contains("time_us") ? number(p, "time_us") : number(p, "time", number(p, "cpu_time"));
  m.algbw = p.contains("algbw_GBs") ? number(p, "algbw_GBs") : number(p, "alg_bw");
  m.busbw = p.contains("busbw_GBs") ? number(p, "busbw_GBs") : number(p, "bus_bw");
  const Json* wrong = p.contains("nwrong") ? &p["nwrong"] : p.contains("wrong") ? &p["wrong"] : nullptr;
  m.wrong = wrong && wrong->is_number() ? static_cast<int64_t>(wrong->get<double>()) : -1;
  auto stats = row.find(std::string(key) + "_per_iter");
  if (stats != row.end() && stats->is_object()) {
    m.hasStats = true;
    m.stats.min = number(*stats, "min_us");
    m.stats.max = number(*stats, "max_us");
    m.stats.avg = number(*stats, "avg_us");
    m.stats.p99 = number(*stats, "p99_us");
    m.stats.cvPercent = number(*stats, "cv_pct");
  } else if (p.contains("cv_percent") && number(p, "max_us") > 0) {
    m.hasStats = true;  // the old layout always had the fields; max_us > 0 says -I filled them
    m.stats.min = number(p, "min_us");
    m.stats.max = number(p, "max_us");
    m.stats.p99 = number(p, "p99_us");
    m.stats.cvPercent = number(p, "cv_percent");
  }
  *perIter = *perIter && m.hasStats;
  return m;
}

// nccl-tests writes root as "%6i" text; the old layout as a number.
int readRoot(const Json& row) {
  auto it = row.find("root");
  if (it == row.end()) return -1;
  if (it->is_number()) return it->get<int>();
  return it->is_string() ? std::atoi(it->get<std::string>().c_str()) : -1;
}

}  // namespace

std::string nowString() {
  char buf[64];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::vector<std::string> relevantEnv() {
  // nccl-tests writes the whole environment; a result file is meant to be shared (perf/results is
  // committed), so coll-perf keeps the variables that change what coll does and leaves tokens out.
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "COLL_", 5) == 0 || std::strncmp(*e, "NCCL_", 5) == 0) out.emplace_back(*e);
  return out;
}

bool writeJson(const std::string& path, const Options& o, const RunInfo& info, const std::vector<Row>& rows) {
  Json doc;
  doc["version"] = kJsonFileVersion;
  doc["start_time"] = info.startTime;
  doc["args"] = info.args;
  doc["env"] = info.env;
  doc["nccl_version"] = info.version;  // the library that ran: coll's version code
  Json config;
  config["nthreads"] = info.threads ? o.nthreads : 1;  // ranks as threads of one process (-t x -g)
  config["ngpus"] = info.threads ? o.ngpus : 1;
  config["minimum_bytes"] = o.minBytes;
  config["maximum_bytes"] = o.maxBytes;
  if (o.factor > 1)
    config["step_factor"] = o.factor;
  else
    config["step_bytes"] = o.step;
  config["warmup_iters"] = o.warmup;
  config["iterations"] = o.iters;
  config["aggregated_iterations"] = o.aggIters;
  config["validation"] = o.check;
  config["graph"] = o.graphs;
  config["blocking_collectives"] = o.blocking != 0;
  config["per_iter_timing"] = o.iterStats != 0;
  config["per_iter_skip"] = o.iterSkip;
  config["parallel_init"] = o.parallelInit != 0;
  Json devices = Json::array();
  for (const Device& d : info.devices)
    devices.push_back({{"rank", d.rank},
                       {"group", 0},
                       {"pid", d.pid},
                       {"hostname", d.host},
                       {"device", d.device},
                       {"device_hex", ""},
                       {"device_info", d.device < 0 ? "host memory" : "CUDA device " + std::to_string(d.device)}});
  config["devices"] = devices;
  doc["config"] = config;
  Json results = Json::array();
  for (const Row& r : rows) {
    char root[16];
    std::snprintf(root, sizeof(root), "%6i", r.root);
    Json j{{"size", r.bytes}, {"count", r.count}, {"type", r.type}, {"redop", r.redop}, {"root", root}};
    j["out_of_place"] = placementJson(r.oop, o.reportCputime);
    if (r.oop.hasStats) j["out_of_place_per_iter"] = perIterJson(r.oop);
    j["in_place"] = placementJson(r.ip, o.reportCputime);
    if (r.ip.hasStats) j["in_place_per_iter"] = perIterJson(r.ip);
    j["actual_iterations"] = r.iters;
    j["experiment_name"] = "";
    j["coll"] = {{"algorithm", r.algorithm}};
    results.push_back(j);
  }
  doc["results"] = results;
  doc["out_of_bounds"] = {{"count", info.wrong}, {"okay", info.wrong == 0}};
  doc["average_bus_bandwidth"] = {{"bandwidth", info.avgBusbw}, {"okay", "unchecked"}};
  doc["coll"] = {{"tool", "coll-perf"},   {"version", info.version},       {"collective", info.collective},
                 {"nranks", info.nranks}, {"transports", info.transports}, {"average", o.average}};
  doc["end_time"] = info.endTime;
  std::ofstream f(path);
  if (!f) return false;
  f << doc.dump(1) << "\n";
  return static_cast<bool>(f);
}

bool readJson(const std::string& path, Result* out, std::string* error) {
  std::ifstream f(path);
  if (!f) return *error = "cannot open " + path, false;
  Json doc = Json::parse(f, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return *error = path + " is not JSON (write result files with -J file.json)", false;
  if (!doc.contains("results") || !doc["results"].is_array())
    return *error = path + " has no \"results\" list: not a coll-perf or nccl-tests -J file", false;
  *out = Result{};
  const Json& coll = doc.contains("coll") && doc["coll"].is_object() ? doc["coll"] : doc;  // old layout: top level
  out->collective = text(coll, "collective");
  out->nranks = static_cast<int>(number(coll, "nranks"));
  if (doc.contains("args") && doc["args"].is_array()) {
    for (const auto& a : doc["args"])
      if (a.is_string()) out->args += (out->args.empty() ? "" : " ") + a.get<std::string>();
  } else {
    out->args = text(doc, "args");
  }
  // nccl-tests' own files: the collective from the program name (all_reduce_perf), ranks from devices.
  if (out->collective.empty() && doc.contains("args") && doc["args"].is_array() && !doc["args"].empty() &&
      doc["args"][0].is_string()) {
    std::string prog = doc["args"][0].get<std::string>();
    prog = prog.substr(prog.rfind('/') + 1);
    out->collective =
        prog.size() > 5 && prog.substr(prog.size() - 5) == "_perf" ? prog.substr(0, prog.size() - 5) : prog;
  }
  if (out->nranks == 0 && doc.contains("config") && doc["config"].contains("devices"))
    out->nranks = static_cast<int>(doc["config"]["devices"].size());
  out->perIter = true;
  for (const auto& r : doc["results"]) {
    if (!r.is_object()) continue;
    Row row;
    row.bytes = static_cast<size_t>(number(r, "size"));
    row.count = static_cast<size_t>(number(r, "count"));
    row.type = text(r, "type");
    row.redop = text(r, "redop");
    row.root = readRoot(r);
    row.iters = static_cast<int>(number(r, "actual_iterations"));
    row.algorithm = r.contains("coll") ? text(r["coll"], "algorithm") : text(r, "algorithm");
    row.oop = readPlacement(r, "out_of_place", &out->perIter);
    bool ipStats = true;  // --compare uses the out-of-place numbers: only their statistics count
    row.ip = readPlacement(r, "in_place", &ipStats);
    out->rows.push_back(row);
  }
  if (out->rows.empty()) out->perIter = false;
  return true;
}

}  // namespace collperf
