// See numa_mode.hpp.
#include "launcher/config/numa_mode.hpp"

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {

NumaMode parse_numa_mode(const std::string& text) {
  if (text == "node") return NumaMode::Node;
  if (text == "socket") return NumaMode::Socket;
  if (text == "exclusive") return NumaMode::Exclusive;
  if (text == "core-complex") return NumaMode::CoreComplex;
  DDP_ASSERT(!is_numa_mode(text), "every mode is parsed above");
  throw UsageError("--numa_binding: " + text + " is not a binding mode; use " + kNumaModesText);
}

bool is_numa_mode(const std::string& text) {
  return text == "node" || text == "socket" || text == "exclusive" || text == "core-complex";
}

std::string numa_mode_name(NumaMode mode) {
  switch (mode) {
    case NumaMode::Node:
      return "node";
    case NumaMode::Socket:
      return "socket";
    case NumaMode::Exclusive:
      return "exclusive";
    case NumaMode::CoreComplex:
      return "core-complex";
  }
  return "?";
}

}  // namespace ddp::launcher
