// Reads a machine's topology through hwloc (Debian libhwloc, loaded at run time:
// hwloc_library.hpp): this machine's, or an XML topology (`lstopo --of xml`, or the fixtures in
// tests/launcher/topology/fixtures/) for tests and diagnosis. NVIDIA GPUs are PCI devices (vendor
// 0x10de, class 0x0300 or 0x0302), so no CUDA or NVML is needed: on this machine they are read from
// sysfs (sysfs_gpus.hpp) and hwloc reads no I/O devices; in an XML topology they are its PCI objects.
#pragma once

#include <string>

#include "launcher/topology/machine.hpp"

namespace ddp::launcher {

// `xml_path` "": this machine (reads /sys and /proc: about a millisecond on a small machine, without
// hwloc's plugins: hwloc_plugins_off.hpp). Blocks on those reads only. Throws Error naming the file
// and hwloc's complaint when the topology cannot be loaded, or hwloc's library cannot
// (hwloc_library.hpp). Not thread-safe: it changes the process's environment for a moment
// (hwloc_plugins_off.hpp); call it while no other thread runs (the launcher does, before its rendezvous).
Machine load_machine(const std::string& xml_path);

}  // namespace ddp::launcher
