// The NVIDIA GPUs of this machine and the NUMA node each is attached to, read straight from
// Linux's sysfs (/sys/bus/pci/devices/<bus id>/{vendor,class,numa_node}): the same devices, in the
// same order, that hwloc's PCI discovery found, without that discovery (tens of milliseconds:
// libpciaccess, every PCI device's config space; bench/RESULTS.md, NUMA binding). A GPU is a PCI
// device of vendor 0x10de with class 0x0300 (VGA) or 0x0302 (3D controller), so no CUDA or NVML is
// needed. A synthetic topology (DDPLAUNCH_HWLOC_XML) carries its GPUs as hwloc objects instead
// (hwloc_machine.cpp).
#pragma once

#include <string>
#include <vector>

#include "launcher/topology/machine.hpp"

namespace ddp::launcher {

struct SysfsGpusOptions {
  // The directory holding one entry per PCI device, named by its bus id ("0000:3b:00.0");
  // tests point it at a fake tree.
  std::string pci_devices = "/sys/bus/pci/devices";
};

// Every NVIDIA GPU under `o.pci_devices`, in PCI bus order (domain, bus, device, function:
// CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi's order), each with its `numa_node` file's value. As
// in torch (torch/numa/binding.py), -1 (no NUMA affinity: one node, or a firmware that does not
// say) counts as node 0, and so does a missing or unreadable `numa_node` (a kernel without NUMA).
// A missing directory means no GPUs. Blocks on a few small sysfs reads per PCI device; throws
// nothing. Thread-safe.
std::vector<Machine::Gpu> sysfs_nvidia_gpus(const SysfsGpusOptions& o = {});

}  // namespace ddp::launcher
