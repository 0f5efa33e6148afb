// expand_hostlist(): Slurm's compressed host lists (ranges, zero padding, several bracket groups)
// and the UsageError for malformed ones.
#include "launcher/slurm.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "launcher/launch_config.hpp"

namespace {

using ddp::launcher::expand_hostlist;
using ddp::launcher::UsageError;
using Hosts = std::vector<std::string>;

TEST_CASE("expand_hostlist expands ranges and single hosts in order", "[slurm]") {
  CHECK(expand_hostlist("gpu[01-04,07],login1") == Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "login1"});
  CHECK(expand_hostlist("n1") == Hosts{"n1"});
  CHECK(expand_hostlist("n[1-2]") == Hosts{"n1", "n2"});
  CHECK(expand_hostlist("a,b,c") == Hosts{"a", "b", "c"});
}

TEST_CASE("expand_hostlist keeps the zero padding of the range's lower bound", "[slurm]") {
  CHECK(expand_hostlist("a[008-011]") == Hosts{"a008", "a009", "a010", "a011"});
}

TEST_CASE("expand_hostlist expands several bracket groups as a product", "[slurm]") {
  CHECK(expand_hostlist("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
}

TEST_CASE("expand_hostlist of an empty list is empty", "[slurm]") {
  CHECK(expand_hostlist("").empty());
}

TEST_CASE("expand_hostlist rejects unbalanced brackets and bad ranges", "[slurm]") {
  CHECK_THROWS_AS(expand_hostlist("gpu[01-02"), UsageError);
  CHECK_THROWS_WITH(expand_hostlist("gpu[01-02"), Catch::Contains("gpu[01-02"));
  CHECK_THROWS_AS(expand_hostlist("gpu01-02]"), UsageError);
  CHECK_THROWS_AS(expand_hostlist("gpu[5-2]"), UsageError);
  CHECK_THROWS_WITH(expand_hostlist("gpu[5-2]"), Catch::Contains("5-2"));
  CHECK_THROWS_AS(expand_hostlist("gpu[a-b]"), UsageError);
  CHECK_THROWS_WITH(expand_hostlist("gpu[a-b]"), Catch::Contains("a-b"));
}

}  // namespace
