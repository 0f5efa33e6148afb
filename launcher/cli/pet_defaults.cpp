// PET_* defaults; see pet_defaults.hpp.
#include "launcher/cli/pet_defaults.hpp"

#include <cctype>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "ddplaunch/common/error.hpp"
#include "launcher/cli/flag_app.hpp"

namespace ddp::launcher {

CLI::Option* PetDefaults::add(CLI::Option* option) {
  if (!FlagApp::declared(option)) return option;  // neither given nor set by a PET_* variable
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
    // An empty value turns a flag on: Kubeflow's elastic PyTorchJob sets PET_STANDALONE="" for
    // standalone: true (torchrun itself fails on it).
    const bool flag = option->get_items_expected_max() == 0;
    try {
      option->add_result(flag && value->empty() ? std::string("1") : *value);
      option->run_callback();
    } catch (const CLI::ParseError& e) {
      throw UsageError(fmt::format("{}={} is not valid for {} ({})", name, *value, option->get_name(), e.what()));
    }
  }
}

}  // namespace ddp::launcher
