// coll-flight: reads the flight-recorder files that ranks write on a failure
// (COLL_FLIGHT_RECORDER_DIR) and prints, per communicator, each rank's last operations and the
// first operation where the ranks diverged (different calls, or called by some ranks only).
#include <dirent.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "report.h"

namespace {

const char* kUsage =
    "usage: coll-flight PATH...\n"
    "  PATH: a coll-flight-*.json file, or a directory holding them (COLL_FLIGHT_RECORDER_DIR)\n";

void addPath(const std::string& path, std::vector<std::string>* files) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    files->push_back(path);
    return;
  }
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("coll-flight-", 0) == 0 && name.size() > 5 && name.substr(name.size() - 5) == ".json")
        files->push_back(path + "/" + name);
    }
    closedir(d);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) addPath(argv[i], &paths);
  if (paths.empty()) {
    std::fprintf(stderr, "coll-flight: no coll-flight-*.json file in the given paths\n");
    return 1;
  }
  std::map<std::string, std::vector<nlohmann::json>> byComm;
  int bad = 0;
  for (const auto& p : paths) {
    std::ifstream in(p);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("format", "") != "coll-flight-1") {
      std::fprintf(stderr, "coll-flight: %s is not a coll flight-recorder file\n", p.c_str());
      ++bad;
      continue;
    }
    byComm[j.value("comm", "")].push_back(std::move(j));
  }
  for (auto& [comm, files] : byComm) std::fputs(collflight::analyze(files).c_str(), stdout);
  return bad ? 1 : 0;
}
