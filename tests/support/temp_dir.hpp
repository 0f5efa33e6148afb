// A fresh private directory (mkdtemp, 0700) for one test, removed with everything in it at the
// end. For Catch2 tests that need files or sockets of their own.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

namespace ddp::testing {

struct TempDir {
  std::filesystem::path path;
  // `name` starts the directory's name under the system's temporary directory.
  explicit TempDir(const std::string& name = "ddp_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (name + "_XXXXXX")).string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;  // best effort: a leftover directory in /tmp fails no test
    std::filesystem::permissions(path, std::filesystem::perms::owner_all, ignored);
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace ddp::testing
