// Which Python runs a `.py` program or `-m MODULE`, decided once per launch, in this order:
//   1. $PYTHON_EXEC (torchrun's override);
//   2. the `python` beside the ddplaunch executable, when ddplaunch is installed in a Python
//      environment's bin/ (pip install into a venv or conda env: `/venv/bin/ddplaunch` runs
//      `/venv/bin/python`, as `/venv/bin/torchrun` runs its own interpreter, with or without an
//      activated environment);
//   3. $VIRTUAL_ENV/bin/python (an activated venv);
//   4. $CONDA_PREFIX/bin/python (an activated conda env);
//   5. python3 on PATH.
// The choice carries the reason, for the dry run, the rank-map line and the ModuleNotFoundError
// hint of the failure summary.
#pragma once

#include <string>

#include "ddplaunch/common/env_lookup.hpp"

namespace ddp::launcher {

struct PythonInterpreter {
  std::string path;    // what argv[0] of a Python worker is: a path, or "python3" looked up on PATH
  std::string reason;  // e.g. "$PYTHON_EXEC", "beside /venv/bin/ddplaunch"
};

// Pure apart from stat(2) of the candidates. `launcher_exe` is the ddplaunch executable's path
// (own_executable()). A candidate counts when it is an executable regular file (or a symbolic
// link to one); PYTHON_EXEC is taken as given (check_program() reports it if it cannot run).
PythonInterpreter choose_python(const Environment& env, const std::string& launcher_exe);

// This process's executable, from /proc/self/exe; "" when unreadable.
std::string own_executable();

}  // namespace ddp::launcher
