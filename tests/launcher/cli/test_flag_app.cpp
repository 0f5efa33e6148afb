// FlagApp (launcher/cli/flag_app.hpp): CLI11's App with the duplicate-name check done in a hash set.
#include "launcher/cli/flag_app.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using ddp::launcher::FlagApp;

TEST_CASE("flags declared through FlagApp parse as CLI11's own and keep their order", "[cli]") {
  FlagApp app{"t"};
  std::string port;
  bool quiet = false;
  int level = 0;
  app.add_option("--master_port,--master-port", port, "p");
  app.add_flag("-q,--quiet", quiet, "q");
  app.add_option("--level", level, "l");
  const std::vector<const char*> argv{"prog", "--master-port", "29500", "-q", "--level=3"};
  app.parse(static_cast<int>(argv.size()), argv.data());
  CHECK(port == "29500");
  CHECK(quiet);
  CHECK(level == 3);
  std::vector<std::string> order;
  for (const CLI::Option* o : app.get_options()) order.push_back(o->get_name());
  CHECK(order == std::vector<std::string>{"--help", "--master_port", "--quiet", "--level"});
}

TEST_CASE("a name declared twice is refused as CLI11 refuses it", "[cli]") {
  FlagApp app{"t"};
  std::string a, b;
  bool f = false;
  app.add_option("--node_rank,--node-rank", a, "");
  CHECK_THROWS_AS(app.add_option("--node-rank", b, ""), CLI::OptionAlreadyAdded);
  CHECK_THROWS_AS(app.add_flag("-h", f, ""), CLI::OptionAlreadyAdded);  // CLI11's --help owns -h
  CHECK_THROWS_AS(app.add_flag("--help", f, ""), CLI::OptionAlreadyAdded);
  // A refused flag leaves the earlier ones as they were.
  CHECK(app.get_options().size() == 2);
  CHECK(app.get_option("--node_rank") != nullptr);
}

TEST_CASE("declare_only declares the flags it accepts and hands back a placeholder for the rest", "[cli]") {
  FlagApp app{"t"};
  std::string port, addr;
  bool quiet = false;
  app.declare_only([](const std::string& names) { return names.find("port") != std::string::npos; });
  CLI::Option* given = app.add_option("--master_port,--master-port", port, "p");
  CLI::Option* left = app.add_option("--master_addr", addr, "a")->type_name("HOST")->check(CLI::NonNegativeNumber);
  CLI::Option* flag = app.add_flag("-q,--quiet", quiet, "q");
  CHECK(FlagApp::declared(given));
  CHECK_FALSE(FlagApp::declared(left));
  CHECK(left == flag);  // one placeholder for every flag left out
  CHECK(app.get_option_no_throw("--master_addr") == nullptr);
  CHECK(app.get_options().size() == 2);  // --help and --master_port
  const std::vector<const char*> argv{"prog", "--master_port=29500"};
  app.parse(static_cast<int>(argv.size()), argv.data());
  CHECK(port == "29500");
  CHECK(app.given("--master_port") == 1);
  CHECK(app.given("--master_addr") == 0);  // not declared: not given, no throw
  CHECK(addr.empty());
}
