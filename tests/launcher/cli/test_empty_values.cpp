// Empty values on the command line (launcher/cli/empty_values.hpp): `--flag=` and `--flag ""`
// refused by the flag's name, except for the flags where empty means something, whose `--flag=`
// becomes `--flag ""`; flags without a value and the program's own arguments left alone.
#include "launcher/cli/empty_values.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ddplaunch/common/error.hpp"
#include "tests/launcher/cli/few_flags.hpp"

using ddp::launcher::check_empty_values;
using Args = std::vector<std::string>;

namespace {

struct Flags : ddp::testing::FewFlags {
  Args check(std::vector<const char*> argv) const {
    return check_empty_values(app, static_cast<int>(argv.size()), argv.data());
  }
};

}  // namespace

TEST_CASE("empty values: refused by the flag's name in either spelling", "[cli]") {
  Flags f;
  const std::string message =
      "--master_addr is empty; give --master_addr=HOST or leave the flag out (see ddplaunch --help)";
  CHECK_THROWS_WITH(f.check({"ddplaunch", "--master_addr=", "train.py"}), message);
  CHECK_THROWS_WITH(f.check({"ddplaunch", "--master-addr", "", "train.py"}), message);
  CHECK_THROWS_AS(f.check({"ddplaunch", "--standalone", "--master_addr", "", "train.py"}), ddp::UsageError);
}

TEST_CASE("empty values: where empty means something, --flag= becomes --flag \"\"", "[cli]") {
  Flags f;
  CHECK(f.check({"ddplaunch", "--rdzv_conf=", "train.py"}) == Args{"ddplaunch", "--rdzv_conf", "", "train.py"});
  CHECK(f.check({"ddplaunch", "--rdzv_conf", "", "train.py"}) == Args{"ddplaunch", "--rdzv_conf", "", "train.py"});
}

TEST_CASE("empty values: values given, flags without one and the program's arguments pass unchanged", "[cli]") {
  Flags f;
  const Args given{"ddplaunch", "--master_addr=10.0.0.1", "--standalone", "--master-addr", "h", "train.py"};
  std::vector<const char*> argv;
  for (const auto& a : given) argv.push_back(a.c_str());
  CHECK(f.check(argv) == given);
  // The program's own empty arguments, after it or after "--", are its business.
  CHECK(f.check({"ddplaunch", "train.py", "--master_addr="}) == Args{"ddplaunch", "train.py", "--master_addr="});
  CHECK(f.check({"ddplaunch", "--", "--master_addr", ""}) == Args{"ddplaunch", "--", "--master_addr", ""});
}
