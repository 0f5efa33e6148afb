// Reads a machine's topology through hwloc (Debian libhwloc, loaded at run time:
// hwloc_library.hpp): this machine's, or an XML topology (`lstopo --of xml`, or the fixtures in
// tests/launcher/topology/fixtures/) for tests and diagnosis. NVIDIA GPUs are found as PCI devices (vendor 0x10de,
// class 0x0300 or 0x0302), so no CUDA or NVML is needed.
#pragma once

#include <string>

#include "launcher/topology/machine.hpp"

namespace ddp::launcher {

// `xml_path` "": this machine (reads /sys and /proc: a few milliseconds; with PCI discovery, a few
// more). Blocks on those reads only. Throws Error naming the file and hwloc's complaint when the
// topology cannot be loaded, or hwloc's library cannot (hwloc_library.hpp). Thread-safe (each call has its own hwloc
// topology).
Machine load_machine(const std::string& xml_path);

}  // namespace ddp::launcher
