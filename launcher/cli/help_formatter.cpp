// See help_formatter.hpp.
#include "launcher/cli/help_formatter.hpp"

namespace ddp::launcher {

std::string HelpFormatter::make_usage(const CLI::App* /*app*/, std::string /*name*/) const {
  return "Usage: ddplaunch [OPTIONS] PROGRAM [ARGS...]\n";
}

std::string HelpFormatter::make_option_name(const CLI::Option* option, bool is_positional) const {
  std::string name = CLI::Formatter::make_option_name(option, is_positional);
  for (std::size_t open = name.find('{'); open != std::string::npos; open = name.find('{', open)) {
    const std::size_t close = name.find('}', open);
    if (close == std::string::npos) break;
    name.erase(open, close - open + 1);
  }
  return name;
}

}  // namespace ddp::launcher
