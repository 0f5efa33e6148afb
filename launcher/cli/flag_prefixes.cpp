// See flag_prefixes.hpp.
#include "launcher/cli/flag_prefixes.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {
namespace {

// The options whose long names start with `prefix` ("--" stripped), each once however many of
// its spellings match.
std::vector<const CLI::Option*> options_starting_with(const CLI::App& app, const std::string& prefix) {
  std::vector<const CLI::Option*> found;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) {
      if (name.compare(0, prefix.size(), prefix) == 0) {
        found.push_back(option);
        break;
      }
    }
  }
  return found;
}

// The option's long name that `prefix` abbreviates, in the spelling the user started (an option
// whose names all match, as --nproc does both, gives its first: torchrun's spelling).
std::string full_name(const CLI::Option& option, const std::string& prefix) {
  for (const std::string& name : option.get_lnames()) {
    if (name.compare(0, prefix.size(), prefix) == 0) return name;
  }
  return option.get_lnames().front();
}

}  // namespace

std::vector<std::string> expand_flag_prefixes(const CLI::App& app, std::vector<std::string> args) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') break;  // the program starts here
    const bool long_flag = arg.compare(0, 2, "--") == 0 && arg.size() > 2;
    const auto eq = long_flag ? arg.find('=') : std::string::npos;
    const std::string name = arg.substr(0, eq);
    const CLI::Option* option = app.get_option_no_throw(name);
    if (option == nullptr && long_flag) {
      const std::vector<const CLI::Option*> matches = options_starting_with(app, name.substr(2));
      if (matches.size() > 1) {
        std::string names;
        for (const CLI::Option* match : matches) names += (names.empty() ? "" : ", ") + match->get_name();
        throw UsageError(fmt::format("{} is ambiguous: {}; write the flag out (see ddplaunch --help)", name, names));
      }
      if (matches.size() == 1) {
        option = matches.front();
        args[i] = "--" + full_name(*option, name.substr(2)) + (eq == std::string::npos ? "" : arg.substr(eq));
      }
    }
    // A flag that takes a value given without '=' has it in the next argument.
    if (option != nullptr && option->get_items_expected_max() > 0 && eq == std::string::npos) ++i;
  }
  return args;
}

}  // namespace ddp::launcher
