// torchrun's PET_<NAME> defaults (launcher/cli/pet_defaults.hpp): an option the command line left
// unset takes its PET_* value through its own conversion and checks, an empty value turns a flag
// on, the command line wins, and a value the option refuses is a usage error naming the variable.
#include "launcher/cli/pet_defaults.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ddplaunch/common/error.hpp"
#include "launcher/cli/flag_app.hpp"

using Catch::Matchers::Contains;
using ddp::Environment;
using ddp::map_env;
using ddp::launcher::FlagApp;
using ddp::launcher::PetDefaults;

namespace {

struct Parsed {
  FlagApp app{"t"};
  PetDefaults pet;
  int nproc = 1;
  std::string addr = "127.0.0.1";
  bool standalone = false;
  Parsed(std::vector<const char*> argv, const Environment& env) {
    pet.add(app.add_option("--nproc_per_node,--nproc-per-node", nproc)->check(CLI::Range(1, 64)));
    pet.add(app.add_option("--master_addr,--master-addr", addr));
    pet.add(app.add_flag("--standalone", standalone));
    argv.insert(argv.begin(), "ddplaunch");
    app.parse(static_cast<int>(argv.size()), argv.data());
    pet.apply(map_env(env));
  }
};

}  // namespace

TEST_CASE("pet defaults: an unset option takes PET_<ITS FIRST LONG NAME>, converted", "[cli]") {
  const Parsed p({}, {{"PET_NPROC_PER_NODE", "4"}, {"PET_MASTER_ADDR", "node0"}, {"PET_NPROC-PER-NODE", "9"}});
  CHECK(p.nproc == 4);
  CHECK(p.addr == "node0");
  CHECK_FALSE(p.standalone);
}

TEST_CASE("pet defaults: the command line wins over PET_*", "[cli]") {
  const Parsed p({"--nproc-per-node=2", "--standalone"}, {{"PET_NPROC_PER_NODE", "4"}, {"PET_STANDALONE", "0"}});
  CHECK(p.nproc == 2);
  CHECK(p.standalone);
}

TEST_CASE("pet defaults: an empty PET_ value turns a flag on, as Kubeflow sets PET_STANDALONE", "[cli]") {
  CHECK(Parsed({}, {{"PET_STANDALONE", ""}}).standalone);
  CHECK(Parsed({}, {{"PET_STANDALONE", "true"}}).standalone);
}

TEST_CASE("pet defaults: a value the option refuses names the variable, its value and the flag", "[cli]") {
  CHECK_THROWS_WITH(Parsed({}, {{"PET_NPROC_PER_NODE", "lots"}}),
                    Contains("PET_NPROC_PER_NODE=lots is not valid for --nproc_per_node"));
  CHECK_THROWS_AS(Parsed({}, {{"PET_NPROC_PER_NODE", "100"}}), ddp::UsageError);  // outside the option's check
}
