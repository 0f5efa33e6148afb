// Looking a program name up on PATH, as execvp(3) would pick it, in one place (the launcher's
// workers and the stack tools it runs). Reads the process's PATH: safe while no thread calls
// setenv. Never throws.
#pragma once

#include <string>

namespace ddp {

// The first regular, executable file DIR/name for DIR in PATH (an empty entry is the current
// directory); "" when there is none or PATH is unset. `name` holds no '/'.
std::string find_on_path(const std::string& name);

}  // namespace ddp
