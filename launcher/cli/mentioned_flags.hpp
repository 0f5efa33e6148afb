// Which of ddplaunch's flags a command line can refer to, so that only those are declared to
// CLI11 (FlagApp::declare_only). Declaring a CLI11 option costs ~6,000 instructions (its names
// split into string vectors, a dozen members built), and declaring all ~90 was 40 % of a launch's
// user-space work, for a command line that names three (bench/RESULTS.md, launch overhead).
// A flag is mentioned when any argument before or after the program could name it:
//   - a long argument ("--nnode", "--nproc-per-node=4") is the start of one of its long names,
//     as argparse's abbreviations are (flag_prefixes.hpp expands them among the declared flags, so
//     every flag an abbreviation could mean is declared and an ambiguous one is still refused);
//   - a short argument ("-m", "-r3") holds one of its short names;
//   - its PET_* variable (pet_defaults.hpp: PET_ + the first long name in upper case) is set.
// Arguments of the program count too: a flag declared and not given changes nothing, so this may
// declare more than needed, never less. A command line that may ask for --help or
// --print_completion (which list every flag) mentions all of them.
#pragma once

#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"

namespace ddp::launcher {

class MentionedFlags {
 public:
  // `args` is argv (args[0], the launcher's name, is skipped); `env` is read once per flag
  // asked about. Pure apart from `env`.
  MentionedFlags(const std::vector<std::string>& args, EnvLookup env);

  // True when every flag must be declared (--help, --print_completion, or an abbreviation of one).
  bool all() const { return all_; }

  // Whether the flag declared with CLI11's names text ("--nproc_per_node,--nproc-per-node",
  // "-m,--module", "--local_rank_arg{underscore}") is mentioned.
  bool operator()(const std::string& names) const;

 private:
  std::vector<std::string> long_args_;  // "--nnode": the name part of each long argument
  std::string short_letters_;           // every letter of the short arguments ("-r3" gives r, 3)
  EnvLookup env_;
  bool all_ = false;
};

}  // namespace ddp::launcher
