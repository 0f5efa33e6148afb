// See nvidia_driver.hpp.
#include "launcher/config/nvidia_driver.hpp"

#include <unistd.h>

namespace ddp::launcher {

std::string nvidia_driver_missing() {
  if (::access("/dev/nvidiactl", F_OK) == 0 || ::access("/dev/dxg", F_OK) == 0) return "";
  return "no NVIDIA driver: no /dev/nvidiactl";
}

}  // namespace ddp::launcher
