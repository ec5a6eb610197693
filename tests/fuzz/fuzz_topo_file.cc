// Fuzzes the topology file reader (src/topo/topo_file.cc): the input is the file's text, given to
// systemFromJson as loadSystemFile does (COLL_TOPO_FILE, coll-topo --load).
#include <string>

#include "fuzz_check.h"
#include "topo/topo_file.h"

namespace coll::fuzz {

int topoFile(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  topo::System s;
  std::string error;
  if (!topo::systemFromJson(text, &s, &error)) {
    COLL_FUZZ_CHECK(!error.empty());
    return 0;
  }
  // What was read can be written (COLL_TOPO_DUMP_FILE) and read back to the same machine.
  std::string dumped = topo::systemToJson(s);
  topo::System again;
  COLL_FUZZ_CHECK(topo::systemFromJson(dumped, &again, &error));
  COLL_FUZZ_CHECK(topo::systemToJson(again) == dumped);
  return 0;
}

}  // namespace coll::fuzz

COLL_FUZZ_ENTRY(coll::fuzz::topoFile)
