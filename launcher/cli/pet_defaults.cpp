// PET_* defaults; see pet_defaults.hpp.
#include "launcher/cli/pet_defaults.hpp"

#include <cctype>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {

CLI::Option* PetDefaults::add(CLI::Option* option) {
  std::string name = "PET_";
  for (char ch : option->get_lnames().front())
    name.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
  options_.emplace_back(option, std::move(name));
  return option;
}

void PetDefaults::apply(const EnvLookup& env) const {
  for (const auto& [option, name] : options_) {
    const auto value = env(name);
    if (!value || option->count() > 0) continue;
    try {
      option->add_result(*value);
      option->run_callback();
    } catch (const CLI::ParseError& e) {
      throw UsageError(fmt::format("{}={} is not valid for {} ({})", name, *value, option->get_name(), e.what()));
    }
  }
}

}  // namespace ddp::launcher
