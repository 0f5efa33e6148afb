// MentionedFlags (launcher/cli/mentioned_flags.hpp): which flags a command line can refer to, and
// parse_command_line declaring only those with the same results as declaring all.
#include "launcher/cli/mentioned_flags.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ddplaunch/common/error.hpp"
#include "launcher/backends.hpp"
#include "launcher/cli/cli.hpp"

using ddp::Environment;
using ddp::map_env;
using ddp::launcher::MentionedFlags;
using ddp::launcher::parse_command_line;

TEST_CASE("a flag is mentioned by its name, an abbreviation, a short letter or its PET_ variable", "[cli]") {
  const MentionedFlags m({"ddplaunch", "--nnode=2", "--nproc-per-node", "4", "-r3", "--standalone", "train.py", "--lo"},
                         map_env(Environment{{"PET_MAX_RESTARTS", "2"}}));
  CHECK_FALSE(m.all());
  CHECK(m("--nnodes"));                           // "--nnode" abbreviates it
  CHECK(m("--nproc_per_node,--nproc-per-node"));  // the dashed spelling
  CHECK(m("-r,--redirects"));                     // -r3
  CHECK(m("--standalone"));
  CHECK(m("--max_restarts,--max-restarts"));  // PET_MAX_RESTARTS
  CHECK(m("--log_dir,--log-dir"));            // the program's own --lo counts too: declared, not given
  CHECK_FALSE(m("--master_addr,--master-addr"));
  CHECK_FALSE(m("-t,--tee"));
  CHECK_FALSE(m("--max_no_progress_restarts,--max-no-progress-restarts"));  // PET_ reads the first name only
  CHECK(m("--local_rank_arg{underscore},--local-rank-arg{underscore}"));    // --lo again, braces cut off
  CHECK_FALSE(m("--use_env{true},--use-env{true}"));
}

TEST_CASE("a command line that may ask for the help or a completion script mentions every flag", "[cli]") {
  for (const char* arg : {"--help", "-h", "--he", "--print_completion", "--print-comp", "-mh"}) {
    CAPTURE(arg);
    CHECK(MentionedFlags({"ddplaunch", arg}, map_env({})).all());
  }
  CHECK_FALSE(MentionedFlags({"ddplaunch", "--nnodes=1", "./train"}, map_env({})).all());
}

TEST_CASE("declaring only the mentioned flags keeps the help, abbreviations and PET_ defaults whole", "[cli]") {
  const auto parse = [](std::vector<const char*> argv, Environment env = {}) {
    return parse_command_line(static_cast<int>(argv.size()), argv.data(), map_env(std::move(env)),
                              ddp::launcher::rendezvous_backends());
  };
  // --help lists flags the rest of the line never names.
  const auto help = parse({"ddplaunch", "--help"});
  REQUIRE(help.early_exit_text);
  CHECK(help.early_exit_text->find("--max_no_progress_restarts") != std::string::npos);
  // An abbreviation still finds every flag it could mean.
  CHECK_THROWS_WITH(parse({"ddplaunch", "--ma=1", "./train"}),
                    Catch::Contains("--master_addr, --master_port, --max_restarts, --max_no_progress_restarts"));
  // A flag set only through its PET_ variable is declared and takes the value.
  const auto pet = parse({"ddplaunch", "--no_python", "./train"}, {{"PET_NPROC_PER_NODE", "3"}});
  CHECK(pet.config.nproc_per_node == 3);
  // An unknown flag is still refused by name.
  CHECK_THROWS_WITH(parse({"ddplaunch", "--bogus", "./train"}), Catch::Contains("--bogus"));
}
