// See python_interpreter.hpp.
#include "launcher/config/python_interpreter.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace ddp::launcher {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string env_value(const Environment& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

}  // namespace

PythonInterpreter choose_python(const Environment& env, const std::string& launcher_exe) {
  if (const std::string exec = env_value(env, "PYTHON_EXEC"); !exec.empty()) return {exec, "$PYTHON_EXEC"};
  if (!launcher_exe.empty()) {
    const std::string beside = std::filesystem::path(launcher_exe).parent_path() / "python";
    if (is_executable_file(beside)) return {beside, fmt::format("beside {}", launcher_exe)};
  }
  if (const std::string venv = env_value(env, "VIRTUAL_ENV"); !venv.empty() && is_executable_file(venv + "/bin/python"))
    return {venv + "/bin/python", "$VIRTUAL_ENV"};
  if (const std::string conda = env_value(env, "CONDA_PREFIX");
      !conda.empty() && is_executable_file(conda + "/bin/python"))
    return {conda + "/bin/python", "$CONDA_PREFIX"};
  return {"python3", "python3 on PATH"};
}

std::string own_executable() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : path.string();
}

}  // namespace ddp::launcher
