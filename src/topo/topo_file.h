// Topology files: a System written as JSON (COLL_TOPO_DUMP_FILE, coll-topo --dump) and read back
// instead of detecting (COLL_TOPO_FILE, coll-topo --load). The format, documented in
// docs/topology-format.md, is one object:
//
//   {"format": "coll-topology", "version": 1, "host": ..., "host_id": ..., "packages": 2,
//    "numa": [{"id", "package", "cores", "memory_bytes"}],
//    "gpus": [{"index", "name", "pci": PCI, "nvswitch_links", "nvlink_GBs_per_link",
//              "nvlinks": [{"peer": bus id, "count"}]}],
//    "nics": [{"name", "netdev", "kind", "pci": PCI, "speed_GBs", "port", "gid"}]}
//   PCI = {"bus_id", "numa", "chain": [bridges from the host bridge down], "link_GBs"}
//
// Unknown keys are errors (a typo would otherwise silently change the machine).
#pragma once

#include <string>

#include "topo/system.h"

namespace coll::topo {

/// The System as the JSON text above.
std::string systemToJson(const System& s);
/// Parses the JSON text; false with *error naming the field on malformed input.
bool systemFromJson(const std::string& text, System* out, std::string* error);

/// Reads a file, JSON or NCCL's XML (topo_xml.h) by its content; false with *error (file name and
/// cause). An XML file names no host: host and host_id are left empty for the caller to fill.
bool loadSystemFile(const std::string& path, System* out, std::string* error);
/// Writes a file: NCCL's XML when path ends in .xml, JSON otherwise.
bool saveSystemFile(const std::string& path, const System& s, std::string* error);

}  // namespace coll::topo
