#include <catch2/catch.hpp>
#include <cstdlib>

#include "base/param.h"
#include "base/params.h"

using namespace coll;

TEST_CASE("integers parse strictly", "[param]") {
  int64_t v = 0;
  CHECK(param::parseInt("42", &v));
  CHECK(v == 42);
  CHECK(param::parseInt("-7", &v));
  CHECK(v == -7);
  CHECK_FALSE(param::parseInt("", &v));
  CHECK_FALSE(param::parseInt("12abc", &v));
  CHECK_FALSE(param::parseInt("abc", &v));
  CHECK_FALSE(param::parseInt("99999999999999999999999", &v));
}

TEST_CASE("booleans accept the usual spellings", "[param]") {
  bool b = false;
  for (const char* t : {"1", "true", "TRUE", "yes", "On"}) {
    CHECK(param::parseBool(t, &b));
    CHECK(b);
  }
  for (const char* f : {"0", "false", "no", "OFF"}) {
    CHECK(param::parseBool(f, &b));
    CHECK_FALSE(b);
  }
  CHECK_FALSE(param::parseBool("maybe", &b));
}

TEST_CASE("a parameter reads the environment, falls back to its default, and reports its source", "[param]") {
  unsetenv("COLL_BOOTSTRAP_TIMEOUT_MS");
  CHECK(params::kBootstrapTimeoutMs.get() == 60000);
  CHECK(params::kBootstrapTimeoutMs.source() == param::Source::kDefault);

  setenv("COLL_BOOTSTRAP_TIMEOUT_MS", "1234", 1);
  CHECK(params::kBootstrapTimeoutMs.get() == 1234);
  CHECK(params::kBootstrapTimeoutMs.source() == param::Source::kEnv);
  CHECK(params::kBootstrapTimeoutMs.validate().isOk());

  setenv("COLL_BOOTSTRAP_TIMEOUT_MS", "soon", 1);
  CHECK(params::kBootstrapTimeoutMs.get() == 60000);  // malformed: default, and validate says why
  auto s = param::validateAll();
  CHECK(s.code() == collInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("COLL_BOOTSTRAP_TIMEOUT_MS='soon'"));

  setenv("COLL_BOOTSTRAP_TIMEOUT_MS", "", 1);  // empty means unset
  CHECK(params::kBootstrapTimeoutMs.source() == param::Source::kDefault);
  unsetenv("COLL_BOOTSTRAP_TIMEOUT_MS");
  CHECK(param::validateAll().isOk());
}

TEST_CASE("booleans from the environment", "[param]") {
  setenv("COLL_CUDA_DISABLE", "yes", 1);
  CHECK(params::kCudaDisable.get());
  setenv("COLL_CUDA_DISABLE", "bogus", 1);
  CHECK_FALSE(params::kCudaDisable.validate().isOk());
  unsetenv("COLL_CUDA_DISABLE");
  CHECK_FALSE(params::kCudaDisable.get());
}

TEST_CASE("the registry lists every parameter once, sorted, and finds unknown COLL_ names", "[param]") {
  auto all = param::all();
  REQUIRE(all.size() >= 15);
  for (size_t i = 1; i < all.size(); ++i) CHECK(std::string(all[i - 1]->name()) < all[i]->name());
  for (const auto* p : all) {
    CHECK(std::string(p->name()).rfind("COLL_", 0) == 0);
    CHECK(std::string(p->doc()).size() > 10);
  }
  CHECK(param::find("COLL_DEBUG") == &params::kDebug);
  CHECK(param::find("COLL_NOPE") == nullptr);

  setenv("COLL_DEBGU", "INFO", 1);
  // The install scripts' and the PyTorch backend's variables, which the README has users set.
  const char* others[] = {"COLL_BUILD_DIR", "COLL_HOME", "COLL_TORCH_VENV", "COLL_SKIP_TORCH",
                          "COLL_TORCH_SHUTDOWN_TIMEOUT_MS"};
  for (const char* o : others) setenv(o, "1", 1);
  auto unknown = param::unknownEnvNames();
  CHECK(std::find(unknown.begin(), unknown.end(), "COLL_DEBGU") != unknown.end());
  for (const char* o : others) {
    CHECK(std::find(unknown.begin(), unknown.end(), o) == unknown.end());
    unsetenv(o);
  }
  unsetenv("COLL_DEBGU");
}

TEST_CASE("NCCL_* variables are reported with their COLL_* twins", "[param]") {
  setenv("NCCL_ALGO", "Ring", 1);
  setenv("NCCL_NO_SUCH_KNOB_FOR_TEST", "1", 1);
  auto twins = coll::param::ncclTwins();
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_NO_SUCH_KNOB_FOR_TEST");
  bool algo = false, orphan = false;
  for (const auto& [nccl, twin] : twins) {
    if (nccl == "NCCL_ALGO") algo = twin == "COLL_ALGO";
    if (nccl == "NCCL_NO_SUCH_KNOB_FOR_TEST") orphan = twin.empty();
  }
  CHECK(algo);
  CHECK(orphan);
}
