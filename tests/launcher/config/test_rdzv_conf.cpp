// The --rdzv_conf key table (launcher/config/rdzv_conf.hpp) and what comes from it: the parser
// (durations applied, other keys kept, a key given twice refused), the unknown-key error listing
// every key, the backend check for etcd-v3's keys, and the --help text naming every key, the TLS
// ones included.
#include "launcher/config/rdzv_conf.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "launcher/config/flag_parsers.hpp"
#include "tests/support/usage_error_of.hpp"

namespace {

using namespace ddp::launcher;
using ddp::testing::usage_error_of;
using namespace std::chrono_literals;

// Every key the table holds, as the unknown-key error and --help must name them.
const char* const kAllKeys[] = {"timeout",
                                "join_timeout",
                                "last_call_timeout",
                                "heartbeat_timeout",
                                "token_file",
                                "bind",
                                "store_memory",
                                "user",
                                "password_file",
                                "protocol",
                                "cacert",
                                "cert",
                                "key",
                                "read_timeout",
                                "close_timeout",
                                "is_host",
                                "store_type",
                                "heartbeat",
                                "keep_alive_interval",
                                "keep_alive_max_attempt",
                                "use_libuv"};

std::string error_of(const std::string& text) {
  LaunchConfig c;
  return usage_error_of([&] { apply_rdzv_conf(text, c); });
}

TEST_CASE("rdzv_conf: durations are applied, the other keys kept", "[rdzv_conf]") {
  LaunchConfig c;
  apply_rdzv_conf("heartbeat_timeout=20,join_timeout=7,timeout=6,bind=*,cacert=/ca.pem,last_call_timeout=0.25", c);
  CHECK(c.rdzv_timeout == 7s);  // join_timeout wins, whatever the order
  CHECK(c.heartbeat_timeout == 20s);
  CHECK(c.last_call_timeout == 250ms);
  CHECK(c.rdzv_conf.at("bind") == "*");
  CHECK(c.rdzv_conf.at("cacert") == "/ca.pem");
  CHECK(c.rdzv_conf.size() == 6);

  LaunchConfig untouched;
  apply_rdzv_conf("", untouched);
  CHECK(untouched.rdzv_conf.empty());
  CHECK(untouched.rdzv_timeout == LaunchConfig().rdzv_timeout);
  CHECK(untouched.last_call_timeout == 3s);
}

TEST_CASE("rdzv_conf: store_memory takes a size of at least 1MiB", "[rdzv_conf]") {
  LaunchConfig c;
  apply_rdzv_conf("store_memory=512MiB", c);
  CHECK(c.rdzv_conf.at("store_memory") == "512MiB");
  CHECK(parse_bytes("512MiB") == std::size_t{512} << 20);
  CHECK(parse_bytes("2G") == std::size_t{2} << 30);
  CHECK(parse_bytes("1048576") == std::size_t{1} << 20);
  CHECK(parse_bytes("1.5GiB") == std::nullopt);
  CHECK(parse_bytes("MiB") == std::nullopt);
  CHECK(parse_bytes("99999999999PiB") == std::nullopt);
  CHECK(error_of("store_memory=1000") ==
        "--rdzv_conf store_memory=1000 is not a size such as 512MiB, 2GiB or 1073741824 (bytes), at least 1MiB");
  CHECK_THAT(error_of("store_memory=lots"), Catch::Contains("store_memory=lots is not a size"));
}

TEST_CASE("rdzv_conf: a key given twice is refused, naming it", "[rdzv_conf]") {
  CHECK(error_of("timeout=5,bind=*,timeout=6") ==
        "--rdzv_conf gives timeout twice (timeout=5 and timeout=6); give it once");
  CHECK_THAT(error_of("user=a,user=a"), Catch::Contains("gives user twice"));
  // In two --rdzv_conf flags too (torchrun would keep only the last flag's list).
  LaunchConfig c;
  CHECK(usage_error_of([&] {
          apply_rdzv_conf(std::vector<std::string>{"timeout=5", "bind=*,timeout=6"}, c);
        }) == "--rdzv_conf gives timeout twice (timeout=5 and timeout=6); give it once");
  apply_rdzv_conf(std::vector<std::string>{"timeout=5", "", "bind=*"}, c);
  CHECK(c.rdzv_timeout == 5s);
  CHECK(c.rdzv_conf.at("bind") == "*");
}

TEST_CASE("rdzv_conf: an unknown key is refused, listing every known key", "[rdzv_conf]") {
  const std::string message = error_of("join_timeout=5,foo=1");
  CHECK_THAT(message, Catch::StartsWith("--rdzv_conf key 'foo' is unknown; use "));
  for (const char* key : kAllKeys) CHECK_THAT(message, Catch::Contains(key));
  CHECK_THAT(error_of("timeout=abc"), Catch::Contains("timeout=abc is not a number of seconds"));
  CHECK_THAT(error_of("read_timeout=x"), Catch::Contains("read_timeout=x"));
  CHECK_THAT(error_of("novalue"), Catch::Contains("'novalue' is not key=value"));
  CHECK_THAT(error_of("token=hunter2"), Catch::Contains("token_file") && !Catch::Contains("hunter2"));
}

TEST_CASE("rdzv_conf: etcd-v3's keys with another backend are refused", "[rdzv_conf]") {
  LaunchConfig c;
  apply_rdzv_conf("timeout=5,bind=*,key=/k.pem", c);
  CHECK(usage_error_of([&] { check_rdzv_conf_backend(c); }) ==
        "--rdzv_conf key applies to --rdzv_backend etcd-v3 only (this job uses static)");
  c.rdzv_backend = "etcd-v3";
  CHECK(usage_error_of([&] { check_rdzv_conf_backend(c); }) == "<no exception>");
  LaunchConfig plain;
  apply_rdzv_conf("timeout=5,bind=*,token_file=/t", plain);
  CHECK(usage_error_of([&] { check_rdzv_conf_backend(plain); }) == "<no exception>");
}

TEST_CASE("rdzv_conf: --help names every key, the TLS keys among etcd-v3's", "[rdzv_conf]") {
  const std::string help = rdzv_conf_help();
  for (const char* key : kAllKeys) CHECK_THAT(help, Catch::Contains(key));
  const auto etcd = help.find("etcd-v3");
  REQUIRE(etcd != std::string::npos);
  for (const char* key :
       {"user=NAME", "password_file=PATH", "protocol=http|https", "cacert=FILE", "cert=FILE", "key=FILE"}) {
    CHECK(help.find(key) > etcd);
  }
  CHECK(help.find("timeout=SECONDS") < etcd);
  CHECK(help.find("bind=ADDR") < etcd);
}

}  // namespace
