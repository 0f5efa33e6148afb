// torchrun's PET_<NAME> environment defaults: an option the command line did not give takes its
// value from PET_<NAME>, where NAME is the option's first long name in upper case
// (--nproc_per_node ← PET_NPROC_PER_NODE). Read through an EnvLookup, not CLI11's envname (which
// reads the real environment), so tests can fake the environment.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"

namespace CLI {
class Option;
}

namespace ddp::launcher {

class PetDefaults {
 public:
  // Registers `option` for a PET_* default and returns it, so a declaration can be wrapped.
  CLI::Option* add(CLI::Option* option);

  // Call after CLI::App::parse: gives every registered option that the command line left unset
  // the value of its PET_* variable in `env` (an empty one turns a flag on, as Kubeflow means it),
  // through the option's own conversion and validators. Throws UsageError naming the variable,
  // its value and the flag when the value is not valid for the flag. Not thread-safe (it writes
  // into the options).
  void apply(const EnvLookup& env) const;

 private:
  std::vector<std::pair<CLI::Option*, std::string>> options_;  // option, its variable's name
};

}  // namespace ddp::launcher
