// numa_bindings() for every mode on two synthetic machines (fixtures/), with GPUs (torch's rules)
// and without (round-robin over NUMA nodes or sockets), the launcher's CPU mask, and the errors.
#include "launcher/topology/numa_binder.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/rank_ranges.hpp"
#include "ddplaunch/common/error.hpp"
#include "launcher/topology/hwloc_machine.hpp"

namespace {

using namespace ddp::launcher;

const std::string kFixtures = DDP_TOPOLOGY_FIXTURES;

// Each worker's CPUs as "0-3" strings, local rank order.
std::vector<std::string> bind(const Machine& m, NumaMode mode, int nproc, std::vector<int> gpus,
                              std::vector<int> allowed = {}) {
  NumaBindingRequest r;
  r.mode = mode;
  r.nproc = nproc;
  r.gpus = std::move(gpus);
  r.allowed_cpus = std::move(allowed);
  std::vector<std::string> out;
  for (const auto& b : numa_bindings(m, r)) out.push_back(ddp::rank_ranges(b.cpus));
  return out;
}

using S = std::vector<std::string>;

TEST_CASE("two sockets, four NUMA nodes, GPUs on nodes 0, 0, 2, 3: torch's rules") {
  const Machine m = load_machine(kFixtures + "/two_socket.xml");
  const std::vector<int> gpus{0, 1, 2, 3};
  CHECK(bind(m, NumaMode::Node, 4, gpus) == S{"0-7", "0-7", "16-23", "24-31"});
  CHECK(bind(m, NumaMode::Socket, 4, gpus) == S{"0-15", "0-15", "16-31", "16-31"});
  CHECK(bind(m, NumaMode::Exclusive, 4, gpus) == S{"0-3", "4-7", "16-23", "24-31"});
  CHECK(bind(m, NumaMode::CoreComplex, 4, gpus) == S{"0-3", "4-7", "16-19", "24-27"});
}

TEST_CASE("two sockets without GPUs: local ranks round-robin over NUMA nodes or sockets") {
  const Machine m = load_machine(kFixtures + "/two_socket.xml");
  CHECK(bind(m, NumaMode::Node, 4, {}) == S{"0-7", "8-15", "16-23", "24-31"});
  CHECK(bind(m, NumaMode::Socket, 4, {}) == S{"0-15", "16-31", "0-15", "16-31"});
  CHECK(bind(m, NumaMode::Exclusive, 4, {}) == S{"0-7", "8-15", "16-23", "24-31"});
  CHECK(bind(m, NumaMode::Exclusive, 8, {}) == S{"0-3", "8-11", "16-19", "24-27", "4-7", "12-15", "20-23", "28-31"});
  CHECK(bind(m, NumaMode::CoreComplex, 8, {}) == S{"0-3", "8-11", "16-19", "24-27", "4-7", "12-15", "20-23", "28-31"});
}

TEST_CASE("one NUMA node per socket, both GPUs on node 1") {
  const Machine m = load_machine(kFixtures + "/one_node_per_socket.xml");
  CHECK(bind(m, NumaMode::Node, 2, {0, 1}) == S{"4-7", "4-7"});
  CHECK(bind(m, NumaMode::Socket, 2, {0, 1}) == S{"4-7", "4-7"});
  CHECK(bind(m, NumaMode::Exclusive, 2, {0, 1}) == S{"4-5", "6-7"});
  CHECK(bind(m, NumaMode::CoreComplex, 2, {0, 1}) == S{"4-7", "4-7"});
  SECTION("one GPU hidden: the other has node 1's cores alone") {
    CHECK(bind(m, NumaMode::Exclusive, 1, {1}) == S{"4-7"});
  }
  SECTION("without GPUs, three workers per node on four cores: the first slice is one core longer") {
    CHECK(bind(m, NumaMode::Exclusive, 6, {}) == S{"0-1", "4-5", "2", "6", "3", "7"});
  }
}

TEST_CASE("one NUMA node per socket without GPUs") {
  const Machine m = load_machine(kFixtures + "/one_node_per_socket.xml");
  for (NumaMode mode : {NumaMode::Node, NumaMode::Socket, NumaMode::Exclusive, NumaMode::CoreComplex})
    CHECK(bind(m, mode, 2, {}) == S{"0-3", "4-7"});
}

TEST_CASE("the launcher's CPU mask limits every binding, as in torch") {
  const Machine m = load_machine(kFixtures + "/two_socket.xml");
  CHECK(bind(m, NumaMode::Node, 1, {0}, {0, 1, 2, 3, 4, 5, 16}) == S{"0-5"});
  CHECK(bind(m, NumaMode::Node, 2, {}, {2, 3, 16}) == S{"2-3", "16"});
  CHECK_THROWS_WITH(bind(m, NumaMode::Node, 1, {2}, {0, 1}), Catch::Contains("NUMA node 2"));
  CHECK_THROWS_WITH(bind(m, NumaMode::Node, 1, {}, {100}), Catch::Contains("none of the topology's CPUs"));
}

TEST_CASE("more workers than GPUs, or than cores for exclusive: one line with the counts and a fix") {
  const Machine m = load_machine(kFixtures + "/one_node_per_socket.xml");
  CHECK_THROWS_AS(bind(m, NumaMode::Node, 3, {0, 1}), ddp::UsageError);
  CHECK_THROWS_WITH(bind(m, NumaMode::Node, 3, {0, 1}), Catch::Contains("2 GPUs for 3 workers"));
  CHECK_THROWS_WITH(bind(m, NumaMode::Exclusive, 10, {}), Catch::Contains("4 physical cores for 5 workers"));
}

TEST_CASE("the place says where and why") {
  const Machine m = load_machine(kFixtures + "/one_node_per_socket.xml");
  NumaBindingRequest r;
  r.mode = NumaMode::Exclusive;
  r.nproc = 2;
  r.gpus = {0, 1};
  CHECK(numa_bindings(m, r)[1].place == "NUMA node 1, core slice 2 of 2, next to GPU 1 (0000:c1:00.0)");
  r.gpus = {};
  r.mode = NumaMode::Socket;
  CHECK(numa_bindings(m, r)[1].place == "socket 1, no GPU: local rank 1 round-robin over 2 sockets");
}

}  // namespace
