// sysfs_nvidia_gpus() on a fake /sys/bus/pci/devices: only NVIDIA display and 3D controllers, in
// PCI bus order, each with its numa_node; -1 and a missing or garbled numa_node count as node 0;
// a missing directory has no GPUs.
#include "launcher/topology/sysfs_gpus.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "tests/support/temp_dir.hpp"

namespace {

using namespace ddp::launcher;
using ddp::testing::TempDir;

// One fake PCI device: <root>/<bus id>/{vendor,class[,numa_node]}, as the kernel writes them.
void add_device(const TempDir& root, const std::string& bus_id, const char* vendor, const char* pci_class,
                const char* numa_node) {
  const auto dir = root.path / bus_id;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "vendor") << vendor << "\n";
  std::ofstream(dir / "class") << pci_class << "\n";
  if (numa_node != nullptr) std::ofstream(dir / "numa_node") << numa_node << "\n";
}

std::vector<Machine::Gpu> gpus_under(const TempDir& root) {
  SysfsGpusOptions o;
  o.pci_devices = root.path.string();
  return sysfs_nvidia_gpus(o);
}

TEST_CASE("sysfs GPUs: NVIDIA display and 3D controllers in PCI bus order with their NUMA nodes") {
  TempDir root("ddp_sysfs_gpus");
  add_device(root, "0000:af:00.0", "0x10de", "0x030200", "3");  // 3D controller (A100, H100)
  add_device(root, "0000:18:00.0", "0x10de", "0x030000", "0");  // VGA (a workstation card)
  add_device(root, "0000:18:00.1", "0x10de", "0x040300", "0");  // the same card's audio function
  add_device(root, "0000:3b:00.0", "0x8086", "0x030000", "1");  // not NVIDIA
  add_device(root, "0000:5e:00.0", "0x10de", "0x068000", "1");  // an NVIDIA bridge (NVSwitch)
  add_device(root, "0000:86:00.0", "0x10de", "0x030200", "2");
  const auto gpus = gpus_under(root);
  REQUIRE(gpus.size() == 3);
  CHECK(gpus[0].pci_bus_id == "0000:18:00.0");
  CHECK(gpus[0].numa_node == 0);
  CHECK(gpus[1].pci_bus_id == "0000:86:00.0");
  CHECK(gpus[1].numa_node == 2);
  CHECK(gpus[2].pci_bus_id == "0000:af:00.0");
  CHECK(gpus[2].numa_node == 3);
}

TEST_CASE("sysfs GPUs: numa_node -1, missing or garbled is node 0") {
  TempDir root("ddp_sysfs_gpus");
  add_device(root, "0000:01:00.0", "0x10de", "0x030200", "-1");
  add_device(root, "0000:02:00.0", "0x10de", "0x030200", nullptr);
  add_device(root, "0000:03:00.0", "0x10de", "0x030200", "node1");
  const auto gpus = gpus_under(root);
  REQUIRE(gpus.size() == 3);
  for (const auto& g : gpus) CHECK(g.numa_node == 0);
}

TEST_CASE("sysfs GPUs: bus order compares the domain as a number (5-digit VMD domains last)") {
  TempDir root("ddp_sysfs_gpus");
  add_device(root, "10000:01:00.0", "0x10de", "0x030200", "1");
  add_device(root, "0000:c1:00.0", "0x10de", "0x030200", "1");
  add_device(root, "0001:02:00.0", "0x10de", "0x030200", "0");
  const auto gpus = gpus_under(root);
  REQUIRE(gpus.size() == 3);
  CHECK(gpus[0].pci_bus_id == "0000:c1:00.0");
  CHECK(gpus[1].pci_bus_id == "0001:02:00.0");
  CHECK(gpus[2].pci_bus_id == "10000:01:00.0");
}

TEST_CASE("sysfs GPUs: no PCI directory, no GPUs") {
  SysfsGpusOptions o;
  o.pci_devices = "/nonexistent/sys/bus/pci/devices";
  CHECK(sysfs_nvidia_gpus(o).empty());
}

}  // namespace
