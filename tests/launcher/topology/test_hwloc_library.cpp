// hwloc loaded at run time (launcher/topology/hwloc_library.hpp): the library is loaded once,
// every function it needs is there, and through them alone a topology loads from one of the
// fixtures' XML files (fixtures/two_socket.xml: two packages) and from this machine.
#include "launcher/topology/hwloc_library.hpp"

#include <catch2/catch.hpp>

#include <string>

using ddp::launcher::HwlocLibrary;

namespace {

const std::string kFixtures = DDP_TOPOLOGY_FIXTURES;

// The number of objects at `depth` of a topology loaded through `h`, from `xml` or, when empty,
// from this machine.
unsigned objects_at(const HwlocLibrary& h, const std::string& xml, int depth) {
  hwloc_topology_t topology = nullptr;
  REQUIRE(h.topology_init(&topology) == 0);
  if (!xml.empty()) REQUIRE(h.topology_set_xml(topology, xml.c_str()) == 0);
  REQUIRE(h.topology_load(topology) == 0);
  unsigned n = 0;
  while (h.get_obj_by_depth(topology, depth, n) != nullptr) ++n;
  h.topology_destroy(topology);
  return n;
}

}  // namespace

TEST_CASE("hwloc library: loaded once, with every function", "[hwloc]") {
  const HwlocLibrary& h = HwlocLibrary::get();
  CHECK(&h == &HwlocLibrary::get());
  CHECK(h.topology_init != nullptr);
  CHECK(h.topology_destroy != nullptr);
  CHECK(h.topology_set_xml != nullptr);
  CHECK(h.topology_set_io_types_filter != nullptr);
  CHECK(h.topology_set_type_filter != nullptr);
  CHECK(h.topology_set_components != nullptr);
  CHECK(h.topology_load != nullptr);
  CHECK(h.get_obj_by_depth != nullptr);
  CHECK(h.bitmap_first != nullptr);
}

TEST_CASE("hwloc library: a topology loads through it from XML and from this machine", "[hwloc]") {
  const HwlocLibrary& h = HwlocLibrary::get();
  CHECK(objects_at(h, kFixtures + "/two_socket.xml", 0) == 1);  // one machine at the root
  CHECK(objects_at(h, "", 0) == 1);
  hwloc_topology_t topology = nullptr;
  REQUIRE(h.topology_init(&topology) == 0);
  CHECK(h.topology_set_xml(topology, (kFixtures + "/no_such_file.xml").c_str()) != 0);
  h.topology_destroy(topology);
}
