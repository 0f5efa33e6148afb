// HwlocPluginsOff: HWLOC_PLUGINS_PATH is set for its life and the user's value (or its absence)
// is back afterwards, so workers never see it.
#include "launcher/topology/hwloc_plugins_off.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

namespace {

using ddp::launcher::HwlocPluginsOff;

TEST_CASE("hwloc plugins off: set for the object's life, then unset again") {
  ::unsetenv("HWLOC_PLUGINS_PATH");
  {
    const HwlocPluginsOff off;
    REQUIRE(std::getenv("HWLOC_PLUGINS_PATH") != nullptr);
  }
  CHECK(std::getenv("HWLOC_PLUGINS_PATH") == nullptr);
}

TEST_CASE("hwloc plugins off: the user's own value comes back") {
  ::setenv("HWLOC_PLUGINS_PATH", "/opt/hwloc/plugins", 1);
  {
    const HwlocPluginsOff off;
    CHECK(std::string(std::getenv("HWLOC_PLUGINS_PATH")) != "/opt/hwloc/plugins");
  }
  CHECK(std::string(std::getenv("HWLOC_PLUGINS_PATH")) == "/opt/hwloc/plugins");
  ::unsetenv("HWLOC_PLUGINS_PATH");
}

}  // namespace
