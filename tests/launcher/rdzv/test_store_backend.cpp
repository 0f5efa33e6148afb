// The built-in store as a backend (store_backend.hpp): its names and its round rules, which are
// BackendRules' defaults (a LaunchConfig made without the command line meets there).
#include "launcher/rdzv/store_backend.hpp"

#include <catch2/catch.hpp>

namespace {

using ddp::launcher::BackendKind;
using ddp::launcher::BackendRules;

TEST_CASE("store backend: static and c10d, node 0 hosts the store, ranks by --node_rank", "[store_backend]") {
  const BackendKind kind = ddp::launcher::store_backend_kind();
  CHECK(kind.names == std::vector<std::string_view>{"static", "c10d"});
  CHECK(kind.refused_names.empty());
  CHECK_FALSE(kind.configure);  // nothing of its own on the command line
  CHECK(kind.make);
  const BackendRules& r = kind.rules;
  CHECK(r.node0_hosts_store);
  CHECK(r.meeting_place.empty());
  CHECK_FALSE(r.ranks_by_arrival);
  CHECK_FALSE(r.any_node_closes);
  CHECK_FALSE(r.always_elastic);
  CHECK_FALSE(r.refuses_active_nodes);
  CHECK_FALSE(r.refuses_standalone);
  CHECK_FALSE(r.refuses_dump_stacks);
}

TEST_CASE("store backend: its rules are what a LaunchConfig starts with", "[store_backend]") {
  CHECK(ddp::launcher::LaunchConfig{}.rdzv_rules == ddp::launcher::store_backend_kind().rules);
  BackendRules other;
  other.node0_hosts_store = false;
  CHECK_FALSE(ddp::launcher::LaunchConfig{}.rdzv_rules == other);
}

}  // namespace
