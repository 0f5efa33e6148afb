// install_python_hook writes the embedded hook byte for byte, with private modes, and names the
// path and the error when it cannot.
#include "launcher/workers/python_hook.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ddplaunch/common/error.hpp"

using ddp::launcher::install_python_hook;
using ddp::launcher::python_hook_source;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string make_temp_dir() {
  std::string pattern = "/tmp/ddp_python_hook_XXXXXX";
  REQUIRE(::mkdtemp(pattern.data()) != nullptr);
  return pattern;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("the embedded hook is the .py file, byte for byte") {
  REQUIRE(python_hook_source() == read_file(DDP_PYTHON_HOOK_PY));
}

TEST_CASE("install_python_hook writes sitecustomize.py 0600 in a 0700 directory, again on a second call") {
  const std::string run_dir = make_temp_dir();
  const mode_t old_umask = ::umask(0);  // the modes must not depend on the umask
  const std::string dir = install_python_hook(run_dir);
  ::umask(old_umask);
  CHECK(dir == run_dir + "/python");
  CHECK(read_file(dir + "/sitecustomize.py") == read_file(DDP_PYTHON_HOOK_PY));
  CHECK(mode_of(dir) == 0700);
  CHECK(mode_of(dir + "/sitecustomize.py") == 0600);
  CHECK(install_python_hook(run_dir) == dir);
  CHECK(read_file(dir + "/sitecustomize.py") == read_file(DDP_PYTHON_HOOK_PY));
  std::filesystem::remove_all(run_dir);
}

TEST_CASE("install_python_hook names the path and the error when the run directory is missing") {
  const std::string run_dir = make_temp_dir() + "/gone";
  try {
    install_python_hook(run_dir);
    FAIL("no error");
  } catch (const ddp::Error& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains(run_dir + "/python") &&
                             Catch::Matchers::Contains("No such file or directory"));
  }
  std::filesystem::remove_all(std::filesystem::path(run_dir).parent_path());
}
