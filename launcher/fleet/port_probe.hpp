// The host side of the preflight's reachability check (`ddplaunch --fleet_probe listen|connect`,
// run over ssh by preflight.hpp; not for users). Every answer is one line on stdout starting with
// kProbeTag, which the controller reads:
//   ("<tag> version <v>" comes before, from the preflight's shell command and `--version`);
//   listen: binds --master_port (0: a free one) on every interface as node 0's store would, then
//   "<tag> listening <port>", or "<tag> port-taken <port> <reason>"; then holds the port until
//   its stdin ends (the controller closes it once every host has tried);
//   connect: waits for a line "go <port>" on stdin (node 0 is listening), connects to
//   --master_addr:<port> within 5 s, and answers "<tag> reached" or "<tag> unreachable <reason>".
#pragma once

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

inline constexpr const char* kProbeTag = "ddplaunch-preflight:";

// Runs the probe config.fleet.fleet_probe asks for. Blocks as above (at most until stdin ends,
// or 5 s for the connection). Returns 0; failures are answers, not exit codes.
int run_port_probe(const LaunchConfig& config);

}  // namespace ddp::launcher
