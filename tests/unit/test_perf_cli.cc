// coll-perf's pure parts: argument parsing, nccl-tests' busbw formulas and shapes, statistics,
// and the JSON format that --compare reads back.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cstdio>
#include <string>
#include <vector>

#include "collectives.h"
#include "options.h"
#include "report.h"

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
  REQUIRE(parse({"all_gather", "-b",  "8",  "-e",  "128M", "-f", "2",      "-n",     "7",       "-w",
                 "0",          "-m",  "4",  "-N",  "3",    "-c", "2",      "-a",     "3",       "-r",
                 "all",        "-z",  "1",  "-T",  "9",    "-I", "-J",     "x.json", "-F",      "x.csv",
                 "-d",         "all", "-o", "all", "-np",  "5",  "--algo", "ring",   "--proto", "LL"},
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
  CHECK(p.iterStats);
  CHECK(p.jsonFile == "x.json");
  CHECK(p.csvFile == "x.csv");
  CHECK(p.types.size() == collNumTypes);
  CHECK(p.ops.size() == collNumOps);
  CHECK(p.np == 5);
  CHECK(p.algo == "ring");
  CHECK(p.proto == "LL");

  Options q;
  REQUIRE(parse({"-C", "sendrecv", "-d", "bfloat16", "-o", "max"}, &q, &err) == Parsed::kRun);
  CHECK(q.collective == "sendrecv");
  CHECK(q.types == std::vector<collDataType_t>{collBfloat16});
  CHECK(q.ops == std::vector<collRedOp_t>{collMax});
  Options h;
  CHECK(parse({"-h"}, &h, &err) == Parsed::kHelp);
}

TEST_CASE("coll-perf: bad command lines are errors with a reason, never a crash", "[perf]") {
  const std::vector<std::vector<const char*>> bad = {
      {"-x"},           {"-b"},          {"-b", "1Q"},       {"-b", "2M", "-e", "1M"},
      {"-f", "1"},      {"-n", "0"},     {"-n", "abc"},      {"-w", "-1"},
      {"-a", "4"},      {"-z", "2"},     {"-d", "complex"},  {"-o", "xor"},
      {"-C", "gather"}, {"all_scatter"}, {"--mem", "gpu"},   {"-G", "2"},
      {"-T", "0"},      {"-np", "0"},    {"--compare", "a"}, {"-r", "-3"},
      {"-m", "0"}};
  for (const auto& args : bad) {
    Options o;
    std::string err;
    INFO(args.front());
    CHECK(parse(args, &o, &err) == Parsed::kError);
    CHECK_FALSE(err.empty());
  }
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
  CHECK(s.cvPercent == Approx(100.0 * 28.866 / 50.5).epsilon(1e-3));
  CHECK(statsOf({5, 5, 5}).cvPercent == 0);
}

TEST_CASE("coll-perf: JSON results read back, and --compare matches rows", "[perf]") {
  RunInfo info{"all_reduce", "2 ranks on 1 host; shm to 1 peer", "-b 8 -e 16", 100, 2};
  std::vector<Row> rows(2);
  rows[0] = {8, 2, "float", "sum", -1, "exchange", {0.5, 0.016, 0.016, 0, {}}, {0.4, 0.02, 0.02, 0, {}}};
  rows[1] = {16, 4, "float", "sum", -1, "exchange", {1.0, 0.016, 0.016, 3, {}}, {0.8, 0.02, 0.02, -1, {}}};
  char path[] = "/tmp/coll-perf-test-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  REQUIRE(writeJson(path, info, rows));
  RunInfo back;
  std::vector<Row> got;
  std::string err;
  REQUIRE(readJson(path, &back, &got, &err));
  CHECK(back.collective == "all_reduce");
  CHECK(back.nranks == 2);
  CHECK(back.args == "-b 8 -e 16");
  REQUIRE(got.size() == 2);
  CHECK(got[1].bytes == 16);
  CHECK(got[1].oop.timeUs == Approx(1.0));
  CHECK(got[1].oop.wrong == 3);
  CHECK(got[1].ip.wrong == -1);
  CHECK(got[0].algorithm == "exchange");
  std::vector<Row> faster = got;
  faster[0].oop.busbw *= 2;
  faster.pop_back();
  FILE* sink = std::tmpfile();
  CHECK(printComparison(sink, back, got, back, faster) == 1);
  std::fclose(sink);
  std::remove(path);
  CHECK_FALSE(readJson("/nonexistent/x.json", &back, &got, &err));
}
