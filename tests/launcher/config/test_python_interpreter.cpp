// choose_python(): the order PYTHON_EXEC, the python beside ddplaunch, $VIRTUAL_ENV,
// $CONDA_PREFIX, python3 on PATH; each with its reason. Candidates are real files in a temporary
// directory, since a candidate counts only when it is an executable file.
#include "launcher/config/python_interpreter.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using ddp::Environment;
using ddp::launcher::choose_python;

// A fresh directory with <name>/bin/python (executable) for each name given.
struct Envs {
  fs::path root;
  Envs() {
    char tmpl[] = "/tmp/ddp_python_test_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    root = tmpl;
  }
  ~Envs() { fs::remove_all(root); }
  std::string add(const std::string& name, bool executable = true) {
    const fs::path bin = root / name / "bin";
    fs::create_directories(bin);
    std::ofstream(bin / "python") << "#!/bin/sh\n";
    fs::permissions(bin / "python", executable ? fs::perms::owner_all : fs::perms::owner_read);
    return (root / name).string();
  }
};

}  // namespace

TEST_CASE("the interpreter is chosen in torchrun's spirit, most explicit first", "[python]") {
  Envs envs;
  const std::string installed = envs.add("installed");
  const std::string venv = envs.add("venv");
  const std::string conda = envs.add("conda");
  const std::string launcher = installed + "/bin/ddplaunch";
  const Environment all{{"PYTHON_EXEC", "/opt/py/bin/python3.12"}, {"VIRTUAL_ENV", venv}, {"CONDA_PREFIX", conda}};

  SECTION("PYTHON_EXEC wins") {
    const auto p = choose_python(all, launcher);
    CHECK(p.path == "/opt/py/bin/python3.12");
    CHECK(p.reason == "$PYTHON_EXEC");
  }
  SECTION("then the python beside an installed ddplaunch, even with another venv active") {
    Environment env = all;
    env.erase("PYTHON_EXEC");
    const auto p = choose_python(env, launcher);
    CHECK(p.path == installed + "/bin/python");
    CHECK(p.reason == "beside " + launcher);
  }
  SECTION("then the activated venv") {
    Environment env = all;
    env.erase("PYTHON_EXEC");
    const auto p = choose_python(env, "/usr/src/build/bin/ddplaunch");
    CHECK(p.path == venv + "/bin/python");
    CHECK(p.reason == "$VIRTUAL_ENV");
  }
  SECTION("then the conda environment") {
    const auto p = choose_python({{"CONDA_PREFIX", conda}}, "/usr/src/build/bin/ddplaunch");
    CHECK(p.path == conda + "/bin/python");
    CHECK(p.reason == "$CONDA_PREFIX");
  }
  SECTION("then python3 on PATH") {
    const auto p = choose_python({}, "");
    CHECK(p.path == "python3");
    CHECK(p.reason == "python3 on PATH");
  }
  SECTION("an environment without an executable python is skipped") {
    const std::string broken = envs.add("broken", false);
    const auto p = choose_python({{"VIRTUAL_ENV", broken}, {"CONDA_PREFIX", conda}}, "");
    CHECK(p.path == conda + "/bin/python");
    CHECK(choose_python({{"VIRTUAL_ENV", envs.root.string() + "/missing"}}, "").path == "python3");
  }
}
