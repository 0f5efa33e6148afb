// --numa_binding's modes: torch's four names, and a wrong one named in the error with the valid ones.
#include "launcher/config/numa_mode.hpp"

#include <catch2/catch.hpp>

#include "ddplaunch/common/error.hpp"

namespace {

using namespace ddp::launcher;

TEST_CASE("the four modes parse and print back") {
  for (const char* name : {"node", "socket", "exclusive", "core-complex"}) {
    CHECK(is_numa_mode(name));
    CHECK(numa_mode_name(parse_numa_mode(name)) == name);
  }
  CHECK_FALSE(is_numa_mode("core_complex"));
  CHECK_THROWS_WITH(parse_numa_mode("numa"),
                    "--numa_binding: numa is not a binding mode; use node, socket, exclusive or core-complex");
}

}  // namespace
