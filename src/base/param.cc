#include "base/param.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

extern char** environ;

namespace coll::param {
namespace {

std::vector<const Base*>& registry() {
  static std::vector<const Base*> params;  // function-local: safe against static init order
  return params;
}

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}

// NCCL twins: a parameter COLL_X that is not set takes the value of NCCL_X, so that a program
// written for NCCL keeps its settings. COLL_NCCL_TWINS (1 or 0) decides when set; otherwise
// setNcclTwins() does (the NCCL drop-in turns them on as it loads, before any parameter is read).
// Read once: parameters are read often, and an unset one must cost one lookup.
std::atomic<int> gTwinsCalled{-1};  // setNcclTwins's choice, -1 before any call

bool ncclTwinsHonoured() {
  static const int fromEnv = [] {
    const char* v = std::getenv("COLL_NCCL_TWINS");
    if (!v || !*v) return -1;
    return std::strcmp(v, "1") == 0 ? 1 : 0;
  }();
  if (fromEnv >= 0) return fromEnv == 1;
  return gTwinsCalled.load(std::memory_order_relaxed) == 1;
}

const char* envValue(const char* name) {
  const char* v = std::getenv(name);
  if ((!v || !*v) && std::strncmp(name, "COLL_", 5) == 0 && ncclTwinsHonoured()) {
    char twin[128];
    if (std::snprintf(twin, sizeof(twin), "NCCL_%s", name + 5) < static_cast<int>(sizeof(twin))) v = std::getenv(twin);
  }
  return (v && *v) ? v : nullptr;  // an empty variable means "unset", as in NCCL
}

const char* typeName(Type t) {
  switch (t) {
    case Type::kInt:
      return "an integer";
    case Type::kBool:
      return "a boolean (0/1, true/false, yes/no, on/off)";
    case Type::kString:
      return "a string";
  }
  return "?";
}

}  // namespace

bool parseInt(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || end == text.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

bool parseBool(const std::string& text, bool* out) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "1" || t == "true" || t == "yes" || t == "on") {
    *out = true;
    return true;
  }
  if (t == "0" || t == "false" || t == "no" || t == "off") {
    *out = false;
    return true;
  }
  return false;
}

Base::Base(const char* name, Type type, std::string defaultText, const char* doc)
    : name_(name), type_(type), defaultText_(std::move(defaultText)), doc_(doc) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().push_back(this);
}

Source Base::source() const { return envValue(name_) ? Source::kEnv : Source::kDefault; }

std::string Base::text() const {
  const char* v = envValue(name_);
  return v ? std::string(v) : defaultText_;
}

Status Base::validate() const {
  const char* v = envValue(name_);
  if (!v) return Status::ok();
  int64_t i;
  bool b;
  bool good =
      type_ == Type::kString || (type_ == Type::kInt && parseInt(v, &i)) || (type_ == Type::kBool && parseBool(v, &b));
  if (good) return Status::ok();
  return COLL_ERROR(collInvalidArgument, FMT_STRING("{}='{}' is not {}"), name_, v, typeName(type_));
}

Int::Int(const char* name, int64_t def, const char* doc)
    : Base(name, Type::kInt, std::to_string(def), doc), default_(def) {}

int64_t Int::get() const {
  const char* v = envValue(name());
  int64_t out;
  return (v && parseInt(v, &out)) ? out : default_;
}

Bool::Bool(const char* name, bool def, const char* doc)
    : Base(name, Type::kBool, def ? "1" : "0", doc), default_(def) {}

bool Bool::get() const {
  const char* v = envValue(name());
  bool out;
  return (v && parseBool(v, &out)) ? out : default_;
}

String::String(const char* name, const char* def, const char* doc) : Base(name, Type::kString, def, doc) {}

std::string String::get() const { return text(); }

void setNcclTwins(bool on) { gTwinsCalled.store(on ? 1 : 0, std::memory_order_relaxed); }

bool ncclTwinsOn() { return ncclTwinsHonoured(); }

std::vector<const Base*> all() {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::vector<const Base*> out = registry();
  std::sort(out.begin(), out.end(), [](const Base* a, const Base* b) { return std::strcmp(a->name(), b->name()) < 0; });
  return out;
}

const Base* find(const std::string& name) {
  std::lock_guard<std::mutex> lock(registryMutex());
  for (const Base* p : registry())
    if (name == p->name()) return p;
  return nullptr;
}

Status validateAll() {
  for (const Base* p : all()) COLL_TRY(p->validate());
  return Status::ok();
}

std::vector<std::string> unknownEnvNames() {
  // COLL_ variables that are meant for coll's other parts, not libcoll: the install and test
  // scripts (scripts/, python/setup.py) and the PyTorch backend. The README tells users to set
  // them, so a warning would be wrong.
  static const char* const kOthers[] = {
      "COLL_BUILD_DIR",    "COLL_HOME",       "COLL_TORCH_VENV",     "COLL_SKIP_TORCH",
      "COLL_TORCH_PYTHON", "COLL_TORCH_SPEC", "COLL_CUOBJDUMP_VENV", "COLL_TORCH_SHUTDOWN_TIMEOUT_MS"};
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "COLL_", 5) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    std::string name = eq ? std::string(*e, eq - *e) : std::string(*e);
    bool other = false;
    for (const char* o : kOthers) other = other || name == o;
    if (!find(name) && !other) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<std::string, std::string>> ncclTwins() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "NCCL_", 5) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    std::string name = eq ? std::string(*e, eq - *e) : std::string(*e);
    std::string twin = "COLL_" + name.substr(5);
    out.emplace_back(name, find(twin) ? twin : "");
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace coll::param
