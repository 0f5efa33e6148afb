// --print_completion SHELL, as torchrun 2.15 has it (there through the optional `shtab` package):
// a completion script for ddplaunch's flags, generated from the declared options so it never
// falls behind them. Completes flags after `-`, file names otherwise.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace ddp::launcher {

// The completion script of `app`'s long and short flags for `shell`: bash, zsh or tcsh, the shells
// torchrun offers without shtab (DDP_ASSERT otherwise: the flag's validator checks it first).
// Pure; never throws.
std::string completion_script(const CLI::App& app, const std::string& shell);

}  // namespace ddp::launcher
