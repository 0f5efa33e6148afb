// How `ddplaunch --help` writes its usage line and flag names, where CLI11 2.1's own formatter
// falls short: the usage line names the binary by its argv[0] (a full path) and not the program
// that follows the flags, and a flag with a default value shows CLI11's markup for it
// ("--local_rank_arg{underscore}"). Not thread-safe (as CLI::Formatter).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace ddp::launcher {

class HelpFormatter : public CLI::Formatter {
 public:
  // "Usage: ddplaunch [OPTIONS] PROGRAM [ARGS...]\n", whatever path ran it.
  std::string make_usage(const CLI::App* app, std::string name) const override;
  // CLI11's names with any "{default}" cut off: "--local_rank_arg, --local-rank-arg".
  std::string make_option_name(const CLI::Option* option, bool is_positional) const override;
};

}  // namespace ddp::launcher
