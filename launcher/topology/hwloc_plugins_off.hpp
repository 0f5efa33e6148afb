// Keeps hwloc from loading its plugins while a topology is initialised. hwloc_topology_init()
// dlopens every plugin in its directory (Debian: PCI with libpciaccess, OpenCL, GL with X11,
// libxml2 with ICU), a few milliseconds before any discovery, and none is needed here: this
// machine is read by hwloc's built-in Linux component with I/O discovery off, and XML topologies by
// its built-in XML parser. hwloc offers no call for this, only its environment variable
// HWLOC_PLUGINS_PATH, read once when its first topology is initialised; so the launcher's own
// environment is changed for the object's life, and restored after.
#pragma once

#include <optional>
#include <string>

namespace ddp::launcher {

class HwlocPluginsOff {
 public:
  // Points HWLOC_PLUGINS_PATH at a directory that does not exist (hwloc then loads no plugin and
  // says nothing), remembering the user's value. Never blocks, never throws.
  HwlocPluginsOff();
  // Puts the user's value back (or removes the variable), so workers see the environment unchanged.
  ~HwlocPluginsOff();
  HwlocPluginsOff(const HwlocPluginsOff&) = delete;
  HwlocPluginsOff& operator=(const HwlocPluginsOff&) = delete;

  // Not thread-safe: setenv and unsetenv race with any other thread reading the environment. The
  // launcher reads the topology once, while it runs one thread (before the rendezvous); tests
  // call it from one thread.

 private:
  std::optional<std::string> saved_;
};

}  // namespace ddp::launcher
