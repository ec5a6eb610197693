#include <catch2/catch.hpp>

#include <map>

#include "bootstrap/launch_env.h"

using namespace coll;

namespace {
Result<LaunchEnv> resolve(std::map<std::string, std::string> vars) {
  return resolveLaunchEnv([vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}
std::string error(std::map<std::string, std::string> vars) {
  auto r = resolve(std::move(vars));
  return r.isOk() ? "ok" : r.status().message();
}
}  // namespace

TEST_CASE("each launcher's variables are read", "[env]") {
  auto e = resolve({{"COLL_RANK", "3"},
                    {"COLL_WORLD_SIZE", "8"},
                    {"COLL_LOCAL_RANK", "1"},
                    {"COLL_MASTER_ADDR", "10.0.0.1"},
                    {"COLL_MASTER_PORT", "29500"}});
  REQUIRE(e.isOk());
  CHECK(e->source == "coll-run");
  CHECK(e->rank == 3);
  CHECK(e->worldSize == 8);
  CHECK(e->localRank == 1);
  CHECK(e->masterAddr == "10.0.0.1");
  CHECK(e->masterPort == 29500);

  e = resolve({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  REQUIRE(e.isOk());
  CHECK(e->source == "torchrun");

  e = resolve({{"OMPI_COMM_WORLD_RANK", "2"},
               {"OMPI_COMM_WORLD_SIZE", "4"},
               {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
               {"COLL_MASTER_ADDR", "h"},
               {"COLL_MASTER_PORT", "5"}});
  REQUIRE(e.isOk());
  CHECK(e->source == "Open MPI");
  CHECK(e->localRank == 2);

  e = resolve({{"SLURM_PROCID", "5"},
               {"SLURM_NTASKS", "6"},
               {"SLURM_LOCALID", "0"},
               {"MASTER_ADDR", "h"},
               {"MASTER_PORT", "7"}});
  REQUIRE(e.isOk());
  CHECK(e->source == "Slurm");

  e = resolve({{"PMI_RANK", "0"}, {"PMI_SIZE", "1"}});
  REQUIRE(e.isOk());
  CHECK(e->source == "PMI");
  CHECK(e->masterAddr.empty());  // one rank needs no master
}

TEST_CASE("the first launcher present wins, in the documented order", "[env]") {
  auto e = resolve({{"COLL_RANK", "1"},
                    {"COLL_WORLD_SIZE", "2"},
                    {"RANK", "5"},
                    {"WORLD_SIZE", "9"},
                    {"SLURM_PROCID", "0"},
                    {"SLURM_NTASKS", "1"},
                    {"COLL_MASTER_ADDR", "h"},
                    {"COLL_MASTER_PORT", "9"}});
  REQUIRE(e.isOk());
  CHECK(e->source == "coll-run");
  CHECK(e->rank == 1);

  e = resolve({{"OMPI_COMM_WORLD_RANK", "1"},
               {"OMPI_COMM_WORLD_SIZE", "2"},
               {"SLURM_PROCID", "0"},
               {"SLURM_NTASKS", "1"},
               {"MASTER_ADDR", "h"},
               {"MASTER_PORT", "9"}});
  REQUIRE(e.isOk());
  CHECK(e->source == "Open MPI");
}

TEST_CASE("missing, malformed and contradictory variables are named", "[env]") {
  CHECK_THAT(error({}), Catch::Contains("no launcher environment"));
  CHECK_THAT(error({{"COLL_RANK", "0"}}), Catch::Contains("COLL_RANK is set but COLL_WORLD_SIZE is not"));
  CHECK_THAT(error({{"WORLD_SIZE", "2"}}), Catch::Contains("WORLD_SIZE is set but RANK is not"));
  CHECK_THAT(error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), Catch::Contains("RANK='x' is not an integer"));
  CHECK_THAT(error({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}),
             Catch::Contains("RANK=2 contradicts WORLD_SIZE=2"));
  CHECK_THAT(error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), Catch::Contains("WORLD_SIZE=0 is outside"));
  CHECK_THAT(error({{"COLL_RANK", "0"}, {"COLL_WORLD_SIZE", "2"}, {"COLL_LOCAL_RANK", "5"}}),
             Catch::Contains("COLL_LOCAL_RANK=5 is outside"));
  CHECK_THAT(error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}),
             Catch::Contains("no master address: Open MPI"));
  CHECK_THAT(error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
             Catch::Contains("MASTER_ADDR is set but MASTER_PORT is not"));
  CHECK_THAT(error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}),
             Catch::Contains("MASTER_PORT=70000 is outside"));
  CHECK_THAT(error({{"RANK", "0"},
                    {"WORLD_SIZE", "2"},
                    {"MASTER_ADDR", "h"},
                    {"MASTER_PORT", "1"},
                    {"COLL_BOOTSTRAP_SECRET", "xyz"}}),
             Catch::Contains("COLL_BOOTSTRAP_SECRET='xyz'"));
}

TEST_CASE("secrets: explicit, or derived identically by every rank of a job", "[env]") {
  std::map<std::string, std::string> base{
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}, {"SLURM_JOB_ID", "77"}};
  auto a = resolve(base);
  auto other = base;
  other["RANK"] = "1";
  auto b = resolve(other);
  other["SLURM_JOB_ID"] = "78";
  auto c = resolve(other);
  REQUIRE((a.isOk() && b.isOk() && c.isOk()));
  CHECK(a->secret == b->secret);
  CHECK(a->secret != c->secret);
  CHECK(a->secretDerived);
  base["COLL_BOOTSTRAP_SECRET"] = "deadbeef";
  CHECK(resolve(base)->secret == 0xdeadbeefull);
  // With a real secret, the value an outsider can derive from the public inputs is not it: the
  // root drops a message carrying it like any wrong secret ([threads] tests that drop).
  CHECK_FALSE(resolve(base)->secretDerived);
  CHECK(resolve(base)->secret != a->secret);
}
