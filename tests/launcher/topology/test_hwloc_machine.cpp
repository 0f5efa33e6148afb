// load_machine() on the synthetic fixtures: every CPU with its core, socket, NUMA node and L3;
// the fake NVIDIA GPUs in PCI order with their NUMA nodes; a missing file is an error naming it.
#include "launcher/topology/hwloc_machine.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <set>
#include <string>

#include "ddplaunch/common/error.hpp"

namespace {

using namespace ddp::launcher;

const std::string kFixtures = DDP_TOPOLOGY_FIXTURES;

TEST_CASE("two sockets with two NUMA nodes each: CPUs, cores, L3 domains, GPUs") {
  const Machine m = load_machine(kFixtures + "/two_socket.xml");
  REQUIRE(m.cpus.size() == 32);
  for (int i = 0; i < 32; ++i) {
    CHECK(m.cpus[i].os_index == i);
    CHECK(m.cpus[i].numa_node == i / 8);
    CHECK(m.cpus[i].package == i / 16);
  }
  CHECK(m.cpus[0].core == m.cpus[1].core);
  CHECK(m.cpus[1].core != m.cpus[2].core);
  CHECK(m.cpus[0].cache == m.cpus[3].cache);
  CHECK(m.cpus[3].cache != m.cpus[4].cache);
  std::set<int> caches;
  for (const auto& c : m.cpus) caches.insert(c.cache);
  CHECK(caches.size() == 8);
  REQUIRE(m.gpus.size() == 4);
  CHECK(m.gpus[0].pci_bus_id == "0000:18:00.0");
  CHECK(m.gpus[0].numa_node == 0);
  CHECK(m.gpus[1].numa_node == 0);
  CHECK(m.gpus[2].numa_node == 2);
  CHECK(m.gpus[3].pci_bus_id == "0000:af:00.0");
  CHECK(m.gpus[3].numa_node == 3);
}

TEST_CASE("one NUMA node per socket, no SMT: both GPUs on node 1") {
  const Machine m = load_machine(kFixtures + "/one_node_per_socket.xml");
  REQUIRE(m.cpus.size() == 8);
  CHECK(m.cpus[4].numa_node == 1);
  CHECK(m.cpus[4].package == 1);
  CHECK(m.cpus[4].core != m.cpus[5].core);
  REQUIRE(m.gpus.size() == 2);
  CHECK(m.gpus[0].numa_node == 1);
  CHECK(m.gpus[1].pci_bus_id == "0000:c1:00.0");
}

TEST_CASE("this machine's topology has at least one CPU, and the environment is left as it was") {
  ::unsetenv("HWLOC_PLUGINS_PATH");  // set only while hwloc initialises (hwloc_plugins_off.hpp)
  const Machine m = load_machine("");
  CHECK_FALSE(m.cpus.empty());
  CHECK(std::getenv("HWLOC_PLUGINS_PATH") == nullptr);
}

TEST_CASE("a missing XML file is an error naming it") {
  CHECK_THROWS_WITH(load_machine("/nonexistent/topo.xml"), Catch::Contains("/nonexistent/topo.xml"));
}

}  // namespace
