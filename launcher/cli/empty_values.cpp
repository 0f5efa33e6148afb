// See empty_values.hpp.
#include "launcher/cli/empty_values.hpp"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "ddplaunch/common/error.hpp"
#include "launcher/cli/cli_options.hpp"

namespace ddp::launcher {
namespace {

bool empty_means_something(const std::string& name) {
  return std::find(std::begin(kEmptyValueMeans), std::end(kEmptyValueMeans), name) != std::end(kEmptyValueMeans);
}

}  // namespace

std::vector<std::string> check_empty_values(const CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> args(argv, argv + argc);
  // The same walk as CLI11's with app.prefix_command(): flags and their values, up to the first
  // other argument, which is the program. Before CLI11 parses, so that no flag's own check (a
  // number of seconds) answers first.
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string arg = args[i];
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') break;
    const bool long_flag = arg.compare(0, 2, "--") == 0;
    const auto eq = long_flag ? arg.find('=') : std::string::npos;
    const CLI::Option* option = app.get_option_no_throw(arg.substr(0, eq));
    if (option == nullptr || option->get_items_expected_max() == 0) continue;  // unknown (CLI11 says so), or no value
    const bool separate = eq == std::string::npos;  // -r3 is not a name, so it never gets here
    const bool empty = separate ? i + 1 < args.size() && args[i + 1].empty() : eq + 1 == arg.size();
    if (separate) ++i;  // its value is the next argument
    if (!empty) continue;
    const std::string name = option->get_name();
    if (!empty_means_something(name)) {
      throw UsageError(fmt::format("{} is empty; give {}={} or leave the flag out (see ddplaunch --help)", name, name,
                                   option->get_type_name()));
    }
    if (!separate) {
      args[i] = arg.substr(0, eq);
      args.insert(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, "");
      ++i;
    }
  }
  return args;
}

}  // namespace ddp::launcher
