// coll-perf's pure parts: argument parsing, nccl-tests' busbw formulas and shapes, statistics,
// and the JSON format that --compare reads back.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "collectives.h"
#include "compare.h"
#include "json_report.h"
#include "options.h"
#include "report.h"
#include "size_arg.h"

using namespace collperf;

namespace {

Parsed parse(std::vector<const char*> args, Options* o, std::string* err) {
  args.insert(args.begin(), "coll-perf");
  return parseOptions(static_cast<int>(args.size()), args.data(), o, err);
}

}  // namespace

TEST_CASE("coll-perf: nccl-tests defaults and flags", "[perf]") {
  Options o;
  std::string err;
  REQUIRE(parse({}, &o, &err) == Parsed::kRun);
  CHECK(o.collective == "all_reduce");
  CHECK(o.minBytes == 32u << 20);
  CHECK(o.maxBytes == 32u << 20);
  CHECK(o.iters == 20);
  CHECK(o.warmup == 5);
  CHECK(o.check == 1);
  CHECK(o.average == 1);
  CHECK(o.root == 0);

  Options p;
  REQUIRE(parse({"all_gather", "-b",  "8",  "-e",     "128M", "-f",      "2",  "-n",    "7",  "-w",  "0",
                 "-m",         "4",   "-N", "3",      "-c",   "2",       "-a", "3",     "-r", "all", "-z",
                 "1",          "-T",  "9",  "-I",     "-J",   "x.json",  "-F", "x.csv", "-d", "all", "-o",
                 "all",        "-np", "5",  "--algo", "ring", "--proto", "LL", "-C",    "1"},
                &p, &err) == Parsed::kRun);
  CHECK(p.collective == "all_gather");
  CHECK(p.minBytes == 8);
  CHECK(p.maxBytes == 128u << 20);
  CHECK(p.factor == 2);
  CHECK(p.iters == 7);
  CHECK(p.warmup == 0);
  CHECK(p.aggIters == 4);
  CHECK(p.cycles == 3);
  CHECK(p.check == 2);
  CHECK(p.average == 3);
  CHECK(p.root == -1);
  CHECK(p.blocking == 1);
  CHECK(p.timeoutS == 9);
  CHECK(p.iterStats == 1);  // a bare -I (coll-perf's old flag) is -I 1
  CHECK(p.reportCputime == 1);
  CHECK(p.jsonFile == "x.json");
  CHECK(p.csvFile == "x.csv");
  CHECK(p.types.size() == collNumTypes);
  CHECK(p.ops.size() == collNumOps);
  CHECK(p.np == 5);
  CHECK(p.algo == "ring");
  CHECK(p.proto == "LL");

  Options q;
  REQUIRE(parse({"--coll", "sendrecv", "-d", "bfloat16", "-o", "max"}, &q, &err) == Parsed::kRun);
  CHECK(q.collective == "sendrecv");
  CHECK(q.types == std::vector<collDataType_t>{collBfloat16});
  CHECK(q.ops == std::vector<collRedOp_t>{collMax});
  Options h;
  CHECK(parse({"-h"}, &h, &err) == Parsed::kHelp);
}

TEST_CASE("coll-perf: bad command lines are errors with a reason, never a crash", "[perf]") {
  const std::vector<std::vector<const char*>> bad = {{"-x", "1"},
                                                     {"-b"},
                                                     {"-b", "1Q"},
                                                     {"-b", "2M", "-e", "1M"},
                                                     {"-f", "x"},
                                                     {"-n", "0"},
                                                     {"-n", "abc"},
                                                     {"-w", "-1"},
                                                     {"-a", "4"},
                                                     {"-z", "4"},
                                                     {"-d", "complex"},
                                                     {"-o", "xor"},
                                                     {"-C", "gather"},
                                                     {"all_scatter"},
                                                     {"--mem", "gpu"},
                                                     {"-G", "2"},
                                                     {"-T", "-1"},
                                                     {"-np", "0"},
                                                     {"--compare", "a"},
                                                     {"-r", "-3"},
                                                     {"-m", "0"},
                                                     {"-t", "0"},
                                                     {"-g", "5000"},
                                                     {"--bogus"},
                                                     {"-q"},
                                                     {"-I", "2"},
                                                     {"-R", "3"},
                                                     {"all_reduce", "broadcast"},
                                                     {"-o", "mulsum"},
                                                     {"--coll", "x"},
                                                     {"-t", "64", "-g", "65"},
                                                     {"-np", "2", "-t", "2"}};
  for (const auto& args : bad) {
    Options o;
    std::string err;
    INFO(args.front());
    CHECK(parse(args, &o, &err) == Parsed::kError);
    CHECK_FALSE(err.empty());
  }
}

// nccl-tests' own command lines (as its README and CI write them) parse with their meanings.
TEST_CASE("coll-perf: nccl-tests command lines", "[perf]") {
  Options o;
  std::string err;
  REQUIRE(parse({"-b", "8", "-e", "128M", "-f", "2", "-g", "1", "-t", "1"}, &o, &err) == Parsed::kRun);
  CHECK(o.maxBytes == 128u << 20);
  Options a;  // attached short values, long options with = and with a separate value
  REQUIRE(parse({"-b8",
                 "--maxbytes",
                 "1M",
                 "--stepfactor=4",
                 "--iters=3",
                 "--warmup_iters",
                 "1",
                 "--agg_iters=2",
                 "--check",
                 "0",
                 "--blocking=3",
                 "--average",
                 "2",
                 "--op=min",
                 "--datatype=int64",
                 "--root=1",
                 "--timeout=0",
                 "--report_cputime=1",
                 "--report_timestamps",
                 "1",
                 "--per_iter_timing=1",
                 "--per_iter_skip=1",
                 "--output_file=r.json",
                 "--run_cycles=2",
                 "--parallel_init=1",
                 "--stream_null=0",
                 "--unalign=3",
                 "--nthreads=1",
                 "--ngpus=1",
                 "--cudagraph=0",
                 "--local_register=0",
                 "--memory=0",
                 "reduce"},
                &a, &err) == Parsed::kRun);
  INFO(err);
  CHECK(a.minBytes == 8);
  CHECK(a.maxBytes == 1u << 20);
  CHECK(a.factor == 4);
  CHECK(a.iters == 3);
  CHECK(a.warmup == 1);
  CHECK(a.aggIters == 2);
  CHECK(a.check == 0);
  CHECK(a.blocking == 3);
  CHECK(a.average == 2);
  CHECK(a.ops == std::vector<collRedOp_t>{collMin});
  CHECK(a.types == std::vector<collDataType_t>{collInt64});
  CHECK(a.root == 1);
  CHECK(a.reportCputime == 1);
  CHECK(a.reportTimestamps == 1);
  CHECK(a.iterStats == 1);
  CHECK(a.iterSkip == 1);
  CHECK(a.jsonFile == "r.json");
  CHECK(a.cycles == 2);
  CHECK(a.unalign == 3);
  CHECK(a.collective == "reduce");
  for (const char* z : {"0", "1", "2", "3"}) {
    Options b;
    CHECK(parse({"-z", z}, &b, &err) == Parsed::kRun);
  }
  Options c;  // the collective anywhere, by nccl-tests' binary name too; -I 0 stays off
  REQUIRE(parse({"-b", "1K", "all_gather_perf", "-I", "0", "--np=3", "--progress"}, &c, &err) == Parsed::kRun);
  CHECK(c.collective == "all_gather");
  CHECK(c.iterStats == 0);
  CHECK(c.np == 3);
  CHECK(c.progressS == 0);
  Options d;  // -C is nccl-tests' report_cputime, never a collective
  CHECK(parse({"-C", "all_reduce"}, &d, &err) == Parsed::kError);
  Options k;  // nccl-tests disables -K without -I, with a warning
  REQUIRE(parse({"-K", "2"}, &k, &err) == Parsed::kRun);
  CHECK(k.iterSkip == 0);
  CHECK(k.warnings.size() == 1);
}

TEST_CASE("coll-perf: refusals name what is accepted", "[perf]") {
  auto error = [](std::vector<const char*> args) {
    Options o;
    std::string err;
    CHECK(parse(args, &o, &err) == Parsed::kError);
    return err;
  };
  CHECK(error({"-t", "0"}).find("a count of ranks from 1 to 4096") != std::string::npos);
  CHECK(error({"-np", "2", "-g", "2"}).find("use one or the other") != std::string::npos);
  {
    // -t and -g are accepted: ranks as threads, t x g of them.
    Options o;
    std::string err;
    REQUIRE(parse({"-t", "3", "-g", "2"}, &o, &err) == Parsed::kRun);
    CHECK(o.nthreads * o.ngpus == 6);
  }
  std::string op = error({"-o", "xor"});
  CHECK(op.find("sum, prod, max, min, avg, all") != std::string::npos);
  CHECK(error({"--datatype=complex"}).find("bfloat16") != std::string::npos);
  CHECK(error({"--bogus"}) == "unknown option --bogus");
  CHECK(error({"-q"}) == "unknown option -q");
  CHECK(error({"-b"}) == "option -b needs a value");
  CHECK(error({"--minbytes"}) == "option --minbytes needs a value");
  CHECK(error({"--coll", "gather"}).find("all_reduce, all_gather") != std::string::npos);
}

TEST_CASE("coll-perf: one size parser, nccl-tests' units", "[perf]") {
  size_t v = 0;
  CHECK((colltools::parseSize("8", &v) && v == 8));
  CHECK((colltools::parseSize("64K", &v) && v == 65536));
  CHECK((colltools::parseSize("1m", &v) && v == 1u << 20));
  CHECK((colltools::parseSize("1.5K", &v) && v == 1536));
  CHECK((colltools::parseSize(" 2 G ", &v) && v == size_t(2) << 30));
  for (const char* bad : {"", "K", "1Q", "-1", "1KK", "nan", "inf", "1e30G"}) {
    INFO(bad);
    CHECK_FALSE(colltools::parseSize(bad, &v));
  }
  double d = 0;
  CHECK((colltools::parseSizeValue("4M", &d) && d == 4194304.0));
}

TEST_CASE("coll-perf: busbw factors and buffer shapes are nccl-tests'", "[perf]") {
  CHECK(busFactor("all_reduce", 4) == Approx(1.5));
  CHECK(busFactor("all_reduce", 1) == 0);
  CHECK(busFactor("all_gather", 4) == Approx(0.75));
  CHECK(busFactor("reduce_scatter", 8) == Approx(0.875));
  CHECK(busFactor("alltoall", 2) == Approx(0.5));
  CHECK(busFactor("broadcast", 8) == 1);
  CHECK(busFactor("reduce", 8) == 1);
  CHECK(busFactor("sendrecv", 8) == 1);

  Shape ar = shapeFor("all_reduce", 1000, 4, 3);
  CHECK(ar.count == 250);
  CHECK(ar.paramCount == 250);
  Shape ag = shapeFor("all_gather", 1000, 4, 3);  // 250 elements, rounded down to 249 = 3 x 83
  CHECK(ag.count == 249);
  CHECK(ag.bytes == 996);
  CHECK(ag.paramCount == 83);
  CHECK(ag.sendElems == 83);
  CHECK(ag.recvElems == 249);
  Shape rs = shapeFor("reduce_scatter", 1000, 4, 3);
  CHECK(rs.sendElems == 249);
  CHECK(rs.recvElems == 83);
  Shape a2a = shapeFor("alltoall", 64, 8, 4);
  CHECK(a2a.paramCount == 2);
  CHECK(a2a.sendElems == 8);
}

TEST_CASE("coll-perf: per-iteration statistics", "[perf]") {
  std::vector<double> t;
  for (int i = 1; i <= 100; ++i) t.push_back(i);
  IterStats s = statsOf(t);
  CHECK(s.min == 1);
  CHECK(s.max == 100);
  CHECK(s.p99 == 99);
  CHECK(s.p95 == 95);
  CHECK(s.p50 == 51);  // nccl-tests: sorted[n / 2]
  CHECK(s.avg == Approx(50.5));
  CHECK(s.cvPercent == Approx(100.0 * 28.866 / 50.5).epsilon(1e-3));
  CHECK(statsOf({5, 5, 5}).cvPercent == 0);
  CHECK(floatStr(3.14159, 7) == "   3.14");
  CHECK(floatStr(123456.7, 6) == "123457");
}

// The reported mean came out below the per-iteration minimum (15.19 vs 22.61 us): the minimum was
// taken over the slowest rank of each iteration. Two ranks that take turns waiting (30 us, then 15)
// each average 22.5 us, while every iteration's slowest rank took 30.
TEST_CASE("coll-perf: per-iteration statistics never put the minimum above the mean", "[perf]") {
  std::vector<double> r0 = {30, 15, 30, 15}, r1 = {15, 30, 15, 30};
  const double meanTime = (22.5 + 22.5) / 2;  // the time column: each rank's total / iterations, -a 1
  for (Across mode : {Across::kRank0, Across::kMean, Across::kMin, Across::kMax}) {
    IterStats s = combineStats({statsOf(r0), statsOf(r1)}, mode);
    INFO(static_cast<int>(mode));
    CHECK(s.min <= s.avg);
    CHECK(s.avg <= s.max);
    CHECK(s.p50 <= s.p99);
    CHECK(s.min <= meanTime);
  }
  CHECK(combineStats({statsOf(r0), statsOf(r1)}, Across::kMean).min == 15);
  CHECK(combineStats({statsOf(r0), statsOf(r1)}, Across::kMean).avg == Approx(meanTime));
  // What the old code did, for the record: the per-iteration maximum's minimum is 30 > 22.5.
  std::vector<double> slowest;
  for (size_t k = 0; k < r0.size(); ++k) slowest.push_back(std::max(r0[k], r1[k]));
  CHECK(statsOf(slowest).min > meanTime);
}

namespace {

std::string tempPath() {
  char path[] = "/tmp/coll-perf-test-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  return path;
}

std::string slurp(FILE* f) {
  std::string s;
  std::rewind(f);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  return s;
}

}  // namespace

TEST_CASE("coll-perf: JSON results in nccl-tests' layout read back, and --compare matches rows", "[perf]") {
  Options o;
  o.minBytes = 8;
  o.maxBytes = 16;
  RunInfo info;
  info.collective = "all_reduce";
  info.transports = "2 ranks on 1 host; shm to 1 peer";
  info.args = {"coll-perf", "-b", "8", "-e", "16"};
  info.version = 100;
  info.nranks = 2;
  info.devices = {{0, 11, "h"}, {1, 12, "h"}};
  std::vector<Row> rows(2);
  rows[0].bytes = 8, rows[0].count = 2, rows[0].type = "float", rows[0].redop = "sum", rows[0].algorithm = "exchange";
  rows[0].oop = {0.5, 0.016, 0.016, 0, false, {}, {}, 0};
  rows[0].ip = {0.4, 0.02, 0.02, 0, false, {}, {}, 0};
  rows[1] = rows[0];
  rows[1].bytes = 16, rows[1].count = 4;
  rows[1].oop = {1.0, 0.016, 0.016, 3, false, {}, {}, 0};
  rows[1].ip.wrong = -1;
  // --mem device: the kernels' own timing rides in the placement's record.
  rows[0].oop.hasDevice = true;
  rows[0].oop.launches = 20;
  rows[0].oop.kernelUs = 3.5;
  std::string path = tempPath();
  REQUIRE(writeJson(path, o, info, rows));
  // nccl-tests' field names, as its tools/analyze_perf_json.py reads them.
  FILE* raw = std::fopen(path.c_str(), "r");
  REQUIRE(raw);
  std::string text = slurp(raw);
  std::fclose(raw);
  for (const char* key : {"\"version\": 3", "\"config\"", "\"nthreads\": 1", "\"minimum_bytes\": 8", "\"results\"",
                          "\"out_of_place\"", "\"bus_bw\"", "\"alg_bw\"", "\"nwrong\": null", "\"root\": \"    -1\"",
                          "\"out_of_bounds\"", "\"average_bus_bandwidth\"", "\"devices\"", "\"actual_iterations\"",
                          "\"device_timing\"", "\"kernel_us\": 3.5", "\"launches\": 20.0"}) {
    INFO(key);
    CHECK(text.find(key) != std::string::npos);
  }
  Result back;
  std::string err;
  REQUIRE(readJson(path, &back, &err));
  CHECK(back.collective == "all_reduce");
  CHECK(back.nranks == 2);
  CHECK(back.args == "coll-perf -b 8 -e 16");
  CHECK_FALSE(back.perIter);
  REQUIRE(back.rows.size() == 2);
  CHECK(back.rows[1].bytes == 16);
  CHECK(back.rows[1].oop.timeUs == Approx(1.0));
  CHECK(back.rows[1].oop.wrong == 3);
  CHECK(back.rows[1].ip.wrong == -1);
  CHECK(back.rows[0].algorithm == "exchange");
  Result faster = back;
  faster.rows[0].oop.busbw *= 2;
  faster.rows.pop_back();
  FILE* sink = std::tmpfile();
  CHECK(printComparison(sink, back, faster) == 1);
  // Single runs without per-iteration statistics: the ratio is flagged as noise-prone.
  CHECK(slurp(sink).find("noise-prone") != std::string::npos);
  std::fclose(sink);
  std::remove(path.c_str());
  CHECK_FALSE(readJson("/nonexistent/x.json", &back, &err));
}

TEST_CASE("coll-perf: --compare flags rows with a high per-iteration cv", "[perf]") {
  Result a;
  a.collective = "all_reduce";
  a.perIter = true;
  Row r;
  r.bytes = 8, r.type = "float", r.redop = "sum";
  r.oop.busbw = 1, r.oop.timeUs = 10, r.oop.hasStats = true, r.oop.stats.cvPercent = 2;
  a.rows = {r};
  Result b = a;
  FILE* quiet = std::tmpfile();
  CHECK(printComparison(quiet, a, b) == 1);
  CHECK(slurp(quiet).find("noise-prone") == std::string::npos);
  std::fclose(quiet);
  b.rows[0].oop.stats.cvPercent = 35;
  FILE* loud = std::tmpfile();
  CHECK(printComparison(loud, a, b) == 1);
  std::string out = slurp(loud);
  CHECK(out.find("noisy") != std::string::npos);
  CHECK(out.find("1 of 1 rows have a per-iteration cv above 10%") != std::string::npos);
  std::fclose(loud);
}

TEST_CASE("coll-perf: --compare reads nccl-tests' own and coll-perf's old JSON", "[perf]") {
  std::string nccl = tempPath(), old = tempPath();
  {
    FILE* f = std::fopen(nccl.c_str(), "w");
    std::fputs(R"({"version":3,"args":["./build/all_reduce_perf","-b","8"],"config":{"devices":[{"rank":0},{"rank":1}]},
"results":[{"size":8,"count":2,"type":"float","redop":"sum","root":"     0",
"out_of_place":{"time":12.5,"alg_bw":0.1,"bus_bw":0.1,"nwrong":0},
"out_of_place_per_iter":{"min_us":10,"max_us":20,"avg_us":12,"p99_us":19,"cv_pct":4},
"in_place":{"time":12,"alg_bw":0.1,"bus_bw":0.1,"nwrong":null}}]})",
               f);
    std::fclose(f);
    f = std::fopen(old.c_str(), "w");
    std::fputs(R"({"tool": "coll-perf", "version": 100, "collective": "all_reduce", "nranks": 2, "args": "-b 8",
 "results": [
  {"size": 8, "count": 2, "type": "float", "redop": "sum", "root": 0, "algorithm": "ring", "out_of_place": {"time_us": 9.000, "algbw_GBs": 0.1, "busbw_GBs": 0.2, "wrong": 0, "min_us": 0.000, "max_us": 0.000, "p99_us": 0.000, "cv_percent": 0.00}, "in_place": {"time_us": 9.000, "algbw_GBs": 0.1, "busbw_GBs": 0.2, "wrong": 0, "min_us": 0.000, "max_us": 0.000, "p99_us": 0.000, "cv_percent": 0.00}}
 ]}
)",
               f);
    std::fclose(f);
  }
  Result a, b;
  std::string err;
  REQUIRE(readJson(nccl, &a, &err));
  REQUIRE(readJson(old, &b, &err));
  CHECK(a.collective == "all_reduce");
  CHECK(a.nranks == 2);
  CHECK(a.perIter);
  REQUIRE(a.rows.size() == 1);
  CHECK(a.rows[0].root == 0);
  CHECK(a.rows[0].oop.timeUs == 12.5);
  CHECK(a.rows[0].oop.stats.cvPercent == 4);
  CHECK(a.rows[0].ip.wrong == -1);
  CHECK(b.rows[0].oop.timeUs == 9);
  CHECK(b.rows[0].oop.busbw == 0.2);
  CHECK(b.rows[0].algorithm == "ring");
  CHECK_FALSE(b.perIter);
  FILE* sink = std::tmpfile();
  CHECK(printComparison(sink, a, b) == 1);
  std::fclose(sink);
  std::remove(nccl.c_str());
  std::remove(old.c_str());
}
