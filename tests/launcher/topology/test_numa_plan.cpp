// The launcher's GPUs from CUDA_VISIBLE_DEVICES, and plan_numa_binding() end to end on a
// synthetic topology named by DDPLAUNCH_HWLOC_XML (and on this machine).
#include "launcher/topology/numa_plan.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "ddplaunch/common/error.hpp"
#include "launcher/topology/hwloc_machine.hpp"

namespace {

using namespace ddp::launcher;

const std::string kFixtures = DDP_TOPOLOGY_FIXTURES;

TEST_CASE("the launcher's GPUs: CUDA_VISIBLE_DEVICES as CUDA reads it") {
  const Machine m = load_machine(kFixtures + "/two_socket.xml");
  using V = std::vector<int>;
  CHECK(launcher_gpus(m, {}) == V{0, 1, 2, 3});
  CHECK(launcher_gpus(m, {{"CUDA_VISIBLE_DEVICES", "3,0"}}) == V{3, 0});
  CHECK(launcher_gpus(m, {{"CUDA_VISIBLE_DEVICES", "1,x,0"}}) == V{1});
  CHECK(launcher_gpus(m, {{"CUDA_VISIBLE_DEVICES", "7"}}).empty());
  CHECK(launcher_gpus(m, {{"CUDA_VISIBLE_DEVICES", ""}}).empty());
  CHECK_THROWS_WITH(launcher_gpus(m, {{"CUDA_VISIBLE_DEVICES", "GPU-1234"}}), Catch::Contains("by number"));
}

TEST_CASE("plan_numa_binding: off, a synthetic topology, this machine, a bad mode") {
  CHECK(plan_numa_binding("", 4, {}).empty());
  const ddp::Environment env{{kHwlocXmlEnv, kFixtures + "/two_socket.xml"}, {"CUDA_VISIBLE_DEVICES", "2,3"}};
  const auto b = plan_numa_binding("node", 2, env);
  REQUIRE(b.size() == 2);
  CHECK(b[0].cpus.front() == 16);
  CHECK(b[1].cpus.front() == 24);
  CHECK(plan_numa_binding("node", 2, {{"CUDA_VISIBLE_DEVICES", ""}}).size() == 2);
  CHECK_THROWS_WITH(plan_numa_binding("rack", 1, {}), Catch::Contains("rack is not a binding mode"));
}

}  // namespace
