// NCCL's XML topology format (NCCL_TOPO_FILE, NCCL_TOPO_DUMP_FILE), read into coll's System and
// written from it, so that the topology files cloud GPU images ship for NCCL work with coll
// unchanged. The elements coll reads (parsed with libxml2):
//
//   <system version="1">
//     <cpu numaid="0" affinity="ffff,ffffffff" arch="x86_64" ...>          one per NUMA node
//       <pci busid="0000:17:00.0" link_speed="16.0 GT/s PCIe" link_width="16" ...>   a bridge
//         <pci busid="0000:18:00.0" ...>                                    a device
//           <gpu dev="0" sm="90" ...>
//             <nvlink target="0000:c7:00.0" count="2" tclass="0x030200"/>   to a GPU
//             <nvlink target="fffffff:ffff:ff" count="18" tclass="0x068000"/>  to NVSwitches
//           </gpu>
//         </pci>
//         <pci busid="0000:19:00.0"><nic><net name="mlx5_0" speed="400000" port="1" .../></nic></pci>
//       </pci>
//       <nic><net name="eth0" speed="25000" .../></nic>                     a NIC without PCI place
//     </cpu>
//   </system>
//
// A <pci> that holds other <pci> elements is a bridge (a PCIe switch port): devices below the same
// bridges share a chain, as hwloc's bridges give detect.cc. Each <cpu> is a NUMA node, its own
// host bridge at the head of its devices' chains, and its own package: NCCL's file has no
// packages, so coll's dumps add a package attribute (NCCL ignores attributes it does not know).
// Attributes coll has no use for are skipped; an element coll does not know is an error naming it
// and its line, as an unknown JSON key is.
#pragma once

#include <string>

#include "topo/system.h"

namespace coll::topo {

/// Parses NCCL's XML topology; false with *error (element, line and cause) on malformed input.
bool systemFromXml(const std::string& text, System* out, std::string* error);
/// The System in NCCL's XML format (bridges named by coll's chain entries get synthetic bus ids
/// when they have none).
std::string systemToXml(const System& s);

}  // namespace coll::topo
