// Shared by the fuzz targets: how a broken invariant is reported, and how a target is entered.
//
// A target body is a function coll::fuzz::<name>(data, size). Built as a fuzzer it is
// LLVMFuzzerTestOneInput; built into coll_unit_tests (COLL_FUZZ_NO_ENTRY) the corpus replay
// test (tests/unit/test_fuzz_corpus.cc) calls it directly, so the gcc build checks the corpus too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

// An input that decodes must satisfy what the decoder's callers rely on; abort() makes a
// violation a crash that libFuzzer records (and that the replay test fails on).
#define COLL_FUZZ_CHECK(cond)                                                                    \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::fprintf(stderr, "fuzz invariant violated at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                              \
    }                                                                                            \
  } while (0)

#ifdef COLL_FUZZ_NO_ENTRY
#define COLL_FUZZ_ENTRY(fn)
#else
#define COLL_FUZZ_ENTRY(fn) \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return fn(data, size); }
#endif
