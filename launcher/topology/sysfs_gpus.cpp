// See sysfs_gpus.hpp. Each device's files hold one hexadecimal or decimal number and a newline
// (vendor "0x10de", class "0x030200": base class, subclass, programming interface; numa_node "-1").
#include "launcher/topology/sysfs_gpus.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <tuple>

namespace ddp::launcher {
namespace {

// The number in a one-line sysfs file (base 0: "0x" for hexadecimal), or `otherwise` when the
// file is missing or holds something else.
long read_number(const std::filesystem::path& file, long otherwise) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text)) return otherwise;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 0);
  return end != text.c_str() && *end == '\0' ? value : otherwise;
}

bool is_nvidia_gpu(const std::filesystem::path& device) {
  if (read_number(device / "vendor", 0) != 0x10de) return false;
  const long pci_class = read_number(device / "class", 0) >> 8;  // without the programming interface
  return pci_class == 0x0300 || pci_class == 0x0302;
}

// (domain, bus, device, function) of "dddd:bb:dd.f"; sysfs names the domain with 4 or more hex
// digits (Intel VMD's domains have 5), so the name's text order is not always bus order.
std::tuple<unsigned, unsigned, unsigned, unsigned> bus_order(const std::string& bus_id) {
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &func);
  return {domain, bus, dev, func};
}

}  // namespace

std::vector<Machine::Gpu> sysfs_nvidia_gpus(const SysfsGpusOptions& o) {
  std::vector<Machine::Gpu> gpus;
  std::error_code ec;  // a missing directory (no PCI bus, or no sysfs) has no GPUs
  for (std::filesystem::directory_iterator it(o.pci_devices, ec), end; !ec && it != end; it.increment(ec)) {
    if (!is_nvidia_gpu(it->path())) continue;
    const long node = read_number(it->path() / "numa_node", -1);
    gpus.push_back(Machine::Gpu{it->path().filename().string(), static_cast<int>(std::max(0L, node))});
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const auto& a, const auto& b) { return bus_order(a.pci_bus_id) < bus_order(b.pci_bus_id); });
  return gpus;
}

}  // namespace ddp::launcher
