// GpuDevices through NVML, loaded at run time with dlopen("libnvidia-ml.so.1"): the launcher
// has no link-time dependency on the driver, and a machine without it reports "no GPU".
#pragma once

#include <memory>
#include <string>

#include "launcher/health/gpu_devices.hpp"

namespace ddp::launcher {

// Loads and initialises NVML on construction (a few milliseconds with a driver); without the
// driver (nvidia_driver_missing(), config/nvidia_driver.hpp) it does not look for the library and
// reports why, e.g. "no NVIDIA driver: no /dev/nvidiactl" (microseconds); shuts NVML down and
// unloads it on destruction. Never throws. Not thread-safe.
class NvmlDevices : public GpuDevices {
 public:
  NvmlDevices();
  ~NvmlDevices() override;
  NvmlDevices(const NvmlDevices&) = delete;
  NvmlDevices& operator=(const NvmlDevices&) = delete;

  std::string unavailable() override { return unavailable_; }
  int count() override;
  // An index is NVML's (nvidia-smi's, PCI order): CUDA's order matches it with
  // CUDA_DEVICE_ORDER=PCI_BUS_ID; UUIDs match whatever the order.
  GpuProbe probe(const std::string& id) override;

 private:
  struct Api;
  void* library_ = nullptr;
  std::unique_ptr<Api> api_;
  bool initialised_ = false;
  std::string unavailable_;
};

}  // namespace ddp::launcher
