// Whether a loaded NVIDIA driver is on this machine, without loading it: CUDA_VISIBLE_DEVICES can
// name GPUs that are not there (a container started without --gpus inherits it), and counting
// GPUs from that variable alone would then start workers that cannot use one. The check is a
// function value so that tests of --nproc_per_node=gpu (flag_parsers.hpp) and the health check
// (health/nvml_devices.hpp) can stand in a machine with or without the driver.
#pragma once

#include <functional>
#include <string>

namespace ddp::launcher {

// "" when the driver is present; else why not, e.g. "no NVIDIA driver: no /dev/nvidiactl".
using NvidiaDriverProbe = std::function<std::string()>;

// The real probe: the device nodes a loaded NVIDIA driver provides, /dev/nvidiactl on Linux (and
// in containers given GPUs) or /dev/dxg under WSL 2. Without one, neither NVML nor CUDA can see a
// GPU (torch.cuda.is_available() is False). Microseconds: two access() calls; never throws.
std::string nvidia_driver_missing();

}  // namespace ddp::launcher
