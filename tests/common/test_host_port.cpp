// The one HOST:PORT parser (common/host_port.hpp): names, IPv4 and bracketed IPv6 with and without
// a port, a default port for text without one, a required port, and the text it refuses (an
// empty host, a bad port, IPv6 outside brackets), each a UsageError naming the caller's flag or
// noun, the text and the caller's fix.
#include "common/host_port.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "ddplaunch/common/error.hpp"
#include "tests/support/usage_error_of.hpp"

namespace {

using ddp::HostPort;
using ddp::HostPortRules;
using ddp::parse_host_port;
using ddp::try_parse_host_port;

// host and port of `text`, or "refused".
std::string parsed(std::string_view text) {
  const auto hp = try_parse_host_port(text);
  if (!hp) return "refused";
  return hp->host + (hp->port ? "|" + std::to_string(*hp->port) : "|none");
}

TEST_CASE("try_parse_host_port reads names, IPv4 and bracketed IPv6, with and without a port", "[host_port]") {
  CHECK(parsed("node7") == "node7|none");
  CHECK(parsed("node7:29500") == "node7|29500");
  CHECK(parsed("gpu-01.cluster_a:1") == "gpu-01.cluster_a|1");
  CHECK(parsed("10.0.0.1:2379") == "10.0.0.1|2379");
  CHECK(parsed("[::1]") == "::1|none");
  CHECK(parsed("[::1]:29500") == "::1|29500");
  CHECK(parsed("[fe80::1:2]:0") == "fe80::1:2|0");
  CHECK(parsed("[::ffff:10.0.0.1]:65535") == "::ffff:10.0.0.1|65535");
  CHECK(parsed("[fe80::1%eth0]:29500") == "fe80::1%eth0|29500");
  CHECK(parsed("[fe80::1%]:29500") == "refused");
}

TEST_CASE("try_parse_host_port refuses an empty host, a bad port and IPv6 outside brackets", "[host_port]") {
  for (const char* bad :
       {"", ":29500", "[]", "[]:1", "[::1", "[::1]x", "[::1]:", "[g::1]:1", "bad host!", "node7:", "node7:65536",
        "node7:99999", "node7:123456", "node7:-1", "node7:+1", "node7:x", "node7:29500:1", "::1", "::1:29500"}) {
    INFO("text: '" << bad << "'");
    CHECK(parsed(bad) == "refused");
  }
}

TEST_CASE("parse_host_port fills in the default port and refuses a missing required one", "[host_port]") {
  const HostPortRules with_default{"--rdzv_endpoint", "e.g. 10.0.0.5:2379", 2379};
  CHECK(parse_host_port("etcd1", with_default).port == 2379);
  CHECK(parse_host_port("[::1]", with_default).port == 2379);
  CHECK(parse_host_port("etcd1:23790", with_default).port == 23790);

  const HostPortRules optional{"--rdzv_endpoint", "e.g. node0:29500"};
  CHECK_FALSE(parse_host_port("node0", optional).port);

  const HostPortRules required{"etcd endpoint", "write it as 127.0.0.1:2379", std::nullopt, true};
  const HostPort hp = parse_host_port("[::1]:2379", required);
  CHECK(hp.host == "::1");
  CHECK(hp.port == 2379);
  CHECK(ddp::testing::usage_error_of([&] { parse_host_port("127.0.0.1", required); }) ==
        "etcd endpoint '127.0.0.1' is not host:port (a name or address, IPv6 in brackets, port 0..65535); write it "
        "as 127.0.0.1:2379");
}

TEST_CASE("parse_host_port's message names the caller's flag, the text and the fix", "[host_port]") {
  const HostPortRules flag{"--rdzv_endpoint", "e.g. node0:29500"};
  for (const char* bad : {"bad host!", "node7:99999", ":29500", "[::1]:x"}) {
    const std::string message = ddp::testing::usage_error_of([&] { parse_host_port(bad, flag); });
    CHECK(message == "--rdzv_endpoint=" + std::string(bad) +
                         " is not host[:port] (a name or address, IPv6 in brackets, port 0..65535); e.g. node0:29500");
  }
}

}  // namespace
