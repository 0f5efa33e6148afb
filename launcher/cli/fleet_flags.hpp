// The flags of a launch over ssh (--hostfile, --hosts and the ones that go with them,
// config/fleet_options.hpp), and the command line the controller hands every host: the user's
// own arguments with those flags taken out. Forwarding the arguments as given, rather than
// rebuilding them from the configuration, is what keeps every per-node flag (DeepSpeed #6859,
// #2802 dropped some under pdsh).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "launcher/config/fleet_options.hpp"

namespace ddp::launcher {

class FlagApp;

// Declares the fleet flags on `app`, bound to `fleet`; the hidden --fleet_stdin and
// --fleet_probe as well (not in --help). Never throws.
void declare_fleet_options(FlagApp& app, FleetOptions& fleet);

// After parsing: fills fleet.forward_args from `args` (argv with flags written out in full,
// args[0] the launcher's name) without the fleet flags (in either `--flag VALUE` or
// `--flag=VALUE` form) nor --dry-run; `program_at` is the index of the first argument that
// belongs to the program (everything from there on is kept untouched). Records in
// fleet.given_flags which of the flags the controller sets per host the user gave. Pure.
void fill_forward_args(const FlagApp& app, const std::vector<std::string>& args, std::size_t program_at,
                       FleetOptions& fleet);

}  // namespace ddp::launcher
