// Fuzzes the reader of NCCL's XML topology (src/topo/topo_xml.cc): the input is a file's text, as
// COLL_TOPO_FILE (NCCL_TOPO_FILE under the drop-in) hands it over. A file that reads must dump to
// XML that reads again (COLL_TOPO_DUMP_FILE ending in .xml).
#include <string>

#include "fuzz_check.h"
#include "topo/topo_xml.h"

namespace coll::fuzz {

int topoXml(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  topo::System s;
  std::string error;
  if (!topo::systemFromXml(text, &s, &error)) {
    COLL_FUZZ_CHECK(!error.empty());
    return 0;
  }
  topo::System again;
  COLL_FUZZ_CHECK(topo::systemFromXml(topo::systemToXml(s), &again, &error));
  COLL_FUZZ_CHECK(again.gpus.size() == s.gpus.size() && again.nics.size() == s.nics.size());
  return 0;
}

}  // namespace coll::fuzz

COLL_FUZZ_ENTRY(coll::fuzz::topoXml)
