// The built-in GPU check: the visible devices (CUDA_VISIBLE_DEVICES, else every device) answer
// and report no uncorrectable ECC error. On a machine without GPUs (no NVML library, no driver,
// no device) it is skipped with the reason, never failed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/health/check_result.hpp"
#include "launcher/health/gpu_devices.hpp"

namespace ddp::launcher {

// The device ids CUDA_VISIBLE_DEVICES names, as CUDA reads it: comma-separated indices or UUIDs,
// up to the first invalid entry (e.g. "-1"); nullopt (unset) means every device. Pure.
std::optional<std::vector<std::string>> visible_gpus(const std::optional<std::string>& cuda_visible_devices);

// Blocks for the driver's answers; never throws.
CheckResult check_gpus(GpuDevices& devices, const std::optional<std::string>& cuda_visible_devices);

}  // namespace ddp::launcher
