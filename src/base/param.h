// The typed parameter registry.
//
// Every tunable of coll is a COLL_* environment variable declared once (name, type, default, doc)
// in params.cc. Values are read from the environment on each get(), so that a test can change a
// variable between calls and coll-info shows what a fresh communicator would see; the data path
// copies what it needs at communicator init instead of calling get() per operation.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace coll::param {

enum class Type { kInt, kBool, kString };

/// Where a parameter's value came from.
enum class Source { kDefault, kEnv };

class Base {
 public:
  Base(const char* name, Type type, std::string defaultText, const char* doc);
  Base(const Base&) = delete;
  Base& operator=(const Base&) = delete;

  const char* name() const { return name_; }
  Type type() const { return type_; }
  const std::string& defaultText() const { return defaultText_; }
  const char* doc() const { return doc_; }
  Source source() const;
  /// The raw environment value, or the default text when unset.
  std::string text() const;
  /// Checks that the environment value (if any) parses as this parameter's type.
  Status validate() const;

 private:
  const char* name_;
  Type type_;
  std::string defaultText_;
  const char* doc_;
};

class Int : public Base {
 public:
  Int(const char* name, int64_t def, const char* doc);
  /// The value from the environment, or the default when unset or malformed (validate() reports it).
  int64_t get() const;

 private:
  int64_t default_;
};

class Bool : public Base {
 public:
  Bool(const char* name, bool def, const char* doc);
  bool get() const;

 private:
  bool default_;
};

class String : public Base {
 public:
  String(const char* name, const char* def, const char* doc);
  std::string get() const;
  bool isSet() const { return source() == Source::kEnv; }
};

/// Parses a decimal integer (optionally negative); rejects trailing garbage and overflow.
bool parseInt(const std::string& text, int64_t* out);
/// Parses 1/0, true/false, yes/no, on/off (case-insensitive).
bool parseBool(const std::string& text, bool* out);

/// Turns NCCL twins on or off for the process (COLL_NCCL_TWINS in the environment wins): a
/// parameter COLL_X the environment does not set then takes NCCL_X's value.
void setNcclTwins(bool on);
/// Whether NCCL twins are read now (the environment's COLL_NCCL_TWINS, else setNcclTwins).
bool ncclTwinsOn();

/// Every registered parameter, sorted by name.
std::vector<const Base*> all();
/// The parameter called name, or nullptr.
const Base* find(const std::string& name);
/// Validates every registered parameter; the first malformed one is collInvalidArgument naming it.
Status validateAll();
/// COLL_* variables present in the environment that no parameter declares (likely typos).
std::vector<std::string> unknownEnvNames();
/// NCCL_* variables set in the environment, each with its COLL_* twin when coll has one ("" when
/// not): coll reads none of them (they may be meant for NCCL in the same process), and users who
/// port scripts are told which COLL_* variable to set instead.
std::vector<std::pair<std::string, std::string>> ncclTwins();

}  // namespace coll::param
