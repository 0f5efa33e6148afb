// The GPUs as the health check sees them: an interface so that the check (gpu_check.hpp) runs
// against a fake in tests; NvmlDevices (nvml_devices.hpp) is the real one.
#pragma once

#include <string>

namespace ddp::launcher {

// One device's answer.
struct GpuProbe {
  std::string error;               // "" when the device answered; else NVML's error text
  long long uncorrected_ecc = -1;  // uncorrectable ECC errors since the driver loaded; -1: not reported
};

// Not thread-safe; one check at a time.
class GpuDevices {
 public:
  virtual ~GpuDevices() = default;
  // "" when devices can be queried; else why not ("libnvidia-ml.so.1 not found"): no GPU here.
  virtual std::string unavailable() = 0;
  // The number of devices the driver sees (after unavailable() returned "").
  virtual int count() = 0;
  // Queries one device by index ("0") or UUID ("GPU-...", "MIG-..."). Blocks for the driver.
  virtual GpuProbe probe(const std::string& id) = 0;
};

}  // namespace ddp::launcher
