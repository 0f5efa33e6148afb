// See hwloc_plugins_off.hpp.
#include "launcher/topology/hwloc_plugins_off.hpp"

#include <cstdlib>

namespace ddp::launcher {
namespace {

constexpr const char* kVariable = "HWLOC_PLUGINS_PATH";
// hwloc reads the variable as a ':'-separated list of directories and skips one it cannot open.
constexpr const char* kNoPlugins = "/nonexistent/ddplaunch-no-hwloc-plugins";

}  // namespace

HwlocPluginsOff::HwlocPluginsOff() {
  if (const char* v = std::getenv(kVariable)) saved_ = v;
  // Fails only without memory (ENOMEM); hwloc then loads its plugins, which costs time, not a result.
  ::setenv(kVariable, kNoPlugins, 1);
}

HwlocPluginsOff::~HwlocPluginsOff() {
  // Neither call can fail here (a valid name; unsetenv frees, setenv of a value that fitted before).
  if (saved_) {
    ::setenv(kVariable, saved_->c_str(), 1);
  } else {
    ::unsetenv(kVariable);
  }
}

}  // namespace ddp::launcher
