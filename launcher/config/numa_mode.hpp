// The modes of --numa_binding, as torch 2.15 names them (torch/numa/binding.py, AffinityMode);
// the topology area (launcher/topology/) applies them.
// Pure.
#pragma once

#include <string>

namespace ddp::launcher {

enum class NumaMode {
  Node,         // every CPU of the NUMA node (of the worker's GPU, or its turn round-robin)
  Socket,       // every CPU of that node's socket
  Exclusive,    // the node's physical cores split evenly among the workers placed on it
  CoreComplex,  // one last-level-cache domain of the node per worker, round-robin
};

// "node, socket, exclusive or core-complex": the valid values, for help and errors.
inline constexpr const char* kNumaModesText = "node, socket, exclusive or core-complex";

// Throws UsageError naming `text` and the valid values.
NumaMode parse_numa_mode(const std::string& text);
bool is_numa_mode(const std::string& text);
std::string numa_mode_name(NumaMode mode);

}  // namespace ddp::launcher
