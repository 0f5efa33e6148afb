// expand_hostlist() (Slurm's compressed host lists: ranges, zero padding, several bracket groups,
// the UsageError for malformed ones) and slurm_master_port(), the one default-port rule.
#include "common/hostlist.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ddplaunch/common/error.hpp"

namespace {

using ddp::expand_hostlist;
using ddp::map_env;
using ddp::slurm_master_port;
using ddp::UsageError;
using Hosts = std::vector<std::string>;

TEST_CASE("expand_hostlist expands ranges and single hosts in order", "[hostlist]") {
  CHECK(expand_hostlist("gpu[01-04,07],login1") == Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "login1"});
  CHECK(expand_hostlist("n1") == Hosts{"n1"});
  CHECK(expand_hostlist("n[1-2]") == Hosts{"n1", "n2"});
  CHECK(expand_hostlist("a,b,c") == Hosts{"a", "b", "c"});
  CHECK(expand_hostlist("n[08-10],gpu5") == Hosts{"n08", "n09", "n10", "gpu5"});
  CHECK(expand_hostlist("a[1,3-4]") == Hosts{"a1", "a3", "a4"});
  CHECK(expand_hostlist("x[1-2]-ib,y") == Hosts{"x1-ib", "x2-ib", "y"});
}

TEST_CASE("expand_hostlist keeps the zero padding of the range's lower bound", "[hostlist]") {
  CHECK(expand_hostlist("a[008-011]") == Hosts{"a008", "a009", "a010", "a011"});
}

TEST_CASE("expand_hostlist expands several bracket groups as a product", "[hostlist]") {
  CHECK(expand_hostlist("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(expand_hostlist("a[1-2]b[3-4]") == Hosts{"a1b3", "a1b4", "a2b3", "a2b4"});
}

TEST_CASE("expand_hostlist of an empty list is empty", "[hostlist]") {
  CHECK(expand_hostlist("").empty());
}

TEST_CASE("expand_hostlist rejects unbalanced brackets and bad ranges, naming them", "[hostlist]") {
  CHECK_THROWS_AS(expand_hostlist("gpu[01-02"), UsageError);
  CHECK_THROWS_WITH(expand_hostlist("gpu[01-02"), Catch::Contains("gpu[01-02"));
  CHECK_THROWS_AS(expand_hostlist("gpu01-02]"), UsageError);
  CHECK_THROWS_AS(expand_hostlist("gpu[5-2]"), UsageError);
  CHECK_THROWS_WITH(expand_hostlist("gpu[5-2]"), Catch::Contains("5-2"));
  CHECK_THROWS_AS(expand_hostlist("gpu[a-b]"), UsageError);
  CHECK_THROWS_WITH(expand_hostlist("gpu[a-b]"), Catch::Contains("a-b"));
  CHECK_THROWS_WITH(expand_hostlist("gpu[]"), Catch::Contains("empty range"));
}

TEST_CASE("expand_hostlist caps the total, not only one range", "[hostlist]") {
  CHECK_THROWS_WITH(expand_hostlist("a[0-99999999]"), Catch::Contains("more than"));
  // Each range is small, the product is not.
  CHECK_THROWS_WITH(expand_hostlist("a[0-999]b[0-999]c[0-9]"), Catch::Contains("more than"));
  // Many entries add up too.
  std::string many;
  for (int i = 0; i < 3; ++i) many += (i ? "," : "") + std::string("n") + std::to_string(i) + "[0-499999]";
  CHECK_THROWS_WITH(expand_hostlist(many), Catch::Contains("more than"));
}

TEST_CASE("slurm_master_port: 15000 + job id mod 20000, MASTER_PORT first", "[hostlist]") {
  CHECK(slurm_master_port(map_env({{"SLURM_JOB_ID", "12345"}})) == 15000 + 12345);
  CHECK(slurm_master_port(map_env({{"SLURM_JOB_ID", "45678"}})) == 15000 + 5678);
  CHECK(slurm_master_port(map_env({{"SLURM_JOB_ID", "45678"}, {"MASTER_PORT", "29555"}})) == 29555);
  CHECK_THROWS_WITH(slurm_master_port(map_env({{"MASTER_PORT", "http"}})), Catch::Contains("MASTER_PORT=http"));
  CHECK_THROWS_WITH(slurm_master_port(map_env({{"MASTER_PORT", "70000"}})), Catch::Contains("MASTER_PORT=70000"));
  CHECK_THROWS_WITH(slurm_master_port(map_env({})), Catch::Contains("SLURM_JOB_ID"));
  CHECK_THROWS_WITH(slurm_master_port(map_env({{"SLURM_JOB_ID", "12a"}})), Catch::Contains("SLURM_JOB_ID=12a"));
}

TEST_CASE("slurm_master_port is exact for job ids at and past 1e9+7 and past 64 bits", "[hostlist]") {
  // 1000000007 % 20000 = 7 (a pre-reduction modulo 1e9+7, as the launcher once did, gave 0).
  CHECK(slurm_master_port(map_env({{"SLURM_JOB_ID", "1000000007"}})) == 15000 + 7);
  CHECK(slurm_master_port(map_env({{"SLURM_JOB_ID", "4294967296"}})) == 15000 + 4294967296LL % 20000);
  // 10^20 + 12345: beyond 64 bits; 10^20 is a multiple of 20000.
  CHECK(slurm_master_port(map_env({{"SLURM_JOB_ID", "100000000000000012345"}})) == 15000 + 12345);
}

}  // namespace
