// coll-run: launches N local ranks of a coll program (or this node's share of a multi-node job).
#include <cstdio>

#include "coll-run/launcher.h"

int main(int argc, char** argv) {
  collrun::Options options;
  std::string error;
  bool help = false;
  if (!collrun::parseArgs(argc, argv, &options, &error, &help)) {
    std::fprintf(stderr, "coll-run: %s\n\n%s", error.c_str(), collrun::usage().c_str());
    return 2;
  }
  if (help) {
    std::fputs(collrun::usage().c_str(), stdout);
    return 0;
  }
  return collrun::run(options);
}
