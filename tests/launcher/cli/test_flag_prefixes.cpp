// argparse's abbreviations (launcher/cli/flag_prefixes.hpp): a long flag shortened to a prefix of
// one option is written out, both spellings of an option count as one, an exact name wins, a
// prefix of several options is refused naming them, and the program's own arguments stay as
// they are.
#include "launcher/cli/flag_prefixes.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ddplaunch/common/error.hpp"
#include "tests/launcher/cli/few_flags.hpp"

using Catch::Matchers::Contains;
using ddp::launcher::expand_flag_prefixes;
using Args = std::vector<std::string>;

TEST_CASE("flag prefixes: an abbreviation of one option is written out, its value kept", "[cli]") {
  ddp::testing::FewFlags f;
  CHECK(expand_flag_prefixes(f.app, {"ddplaunch", "--nnode", "2", "--stand", "train.py"}) ==
        Args{"ddplaunch", "--nnodes", "2", "--standalone", "train.py"});
  CHECK(expand_flag_prefixes(f.app, {"ddplaunch", "--nnode=2", "train.py"}) ==
        Args{"ddplaunch", "--nnodes=2", "train.py"});
}

TEST_CASE("flag prefixes: both spellings of an option are one option, in the spelling begun", "[cli]") {
  ddp::testing::FewFlags f;
  CHECK(expand_flag_prefixes(f.app, {"ddplaunch", "--nproc", "4", "t.py"}) ==
        Args{"ddplaunch", "--nproc_per_node", "4", "t.py"});
  CHECK(expand_flag_prefixes(f.app, {"ddplaunch", "--nproc-per", "4", "t.py"}) ==
        Args{"ddplaunch", "--nproc-per-node", "4", "t.py"});
}

TEST_CASE("flag prefixes: an exact name wins, a prefix of several options is refused naming them", "[cli]") {
  ddp::testing::FewFlags f;
  CHECK(expand_flag_prefixes(f.app, {"ddplaunch", "--rdzv", "x", "t.py"}) == Args{"ddplaunch", "--rdzv", "x", "t.py"});
  CHECK_THROWS_AS(expand_flag_prefixes(f.app, {"ddplaunch", "--rdzv_", "x", "t.py"}), ddp::UsageError);
  CHECK_THROWS_WITH(expand_flag_prefixes(f.app, {"ddplaunch", "--rdzv_", "x", "t.py"}),
                    Contains("--rdzv_ is ambiguous") && Contains("rdzv_backend") && Contains("rdzv_conf"));
}

TEST_CASE("flag prefixes: the program's arguments and unknown flags are left as they are", "[cli]") {
  ddp::testing::FewFlags f;
  // A flag's value that looks like a prefix is a value; after the program nothing is expanded.
  CHECK(expand_flag_prefixes(f.app, {"ddplaunch", "--nnodes", "--nnode", "t.py", "--nnode", "1"}) ==
        Args{"ddplaunch", "--nnodes", "--nnode", "t.py", "--nnode", "1"});
  CHECK(expand_flag_prefixes(f.app, {"ddplaunch", "--", "--nnode", "1"}) == Args{"ddplaunch", "--", "--nnode", "1"});
  CHECK(expand_flag_prefixes(f.app, {"ddplaunch", "--bogus", "t.py"}) == Args{"ddplaunch", "--bogus", "t.py"});
}
