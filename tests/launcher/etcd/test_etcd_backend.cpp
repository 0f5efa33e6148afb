// etcd-v3 as a backend (etcd_backend.hpp): its names, the names it refuses, and its round rules,
// without an etcd server.
#include "launcher/etcd/etcd_backend.hpp"

#include <catch2/catch.hpp>

namespace {

using ddp::launcher::BackendKind;
using ddp::launcher::BackendRules;

TEST_CASE("etcd backend: etcd-v3, torchrun's etcd and etcd-v2 refused with the fix", "[etcd_backend]") {
  const BackendKind kind = ddp::launcher::etcd_backend_kind();
  CHECK(kind.names == std::vector<std::string_view>{"etcd-v3"});
  CHECK(kind.refused_names == std::vector<std::string_view>{"etcd", "etcd-v2"});
  CHECK_THAT(std::string(kind.refused_why), Catch::Contains("use --rdzv_backend etcd-v3"));
  CHECK(kind.configure);  // the members, user and password (etcd_config.hpp)
  CHECK(kind.make);
}

TEST_CASE("etcd backend: no node hosts the launchers' store, every round elastic and by arrival", "[etcd_backend]") {
  const BackendRules r = ddp::launcher::etcd_backend_kind().rules;
  CHECK_FALSE(r.node0_hosts_store);
  CHECK(r.meeting_place == "etcd");
  CHECK(r.ranks_by_arrival);
  CHECK(r.any_node_closes);
  CHECK(r.always_elastic);
  CHECK(r.refuses_active_nodes);
  CHECK(r.refuses_standalone);
  CHECK(r.refuses_dump_stacks);
}

}  // namespace
