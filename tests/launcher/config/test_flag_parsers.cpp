// One flag's text turned into a value (launcher/config/flag_parsers.hpp): seconds, whole numbers,
// comma lists, --nnodes ranges, --nproc_per_node words with the devices counted from a fake
// environment, --redirects/--tee selections and --rdzv_endpoint, each malformed text refused
// naming the flag and the text. (parse_bytes: test_rdzv_conf; parse_line_filters and count_xpus
// over a fake sysfs: test_torchrun_knobs.)
#include "launcher/config/flag_parsers.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "ddplaunch/common/error.hpp"

using Catch::Matchers::Contains;
using ddp::Environment;
using ddp::map_env;
using ddp::UsageError;
using namespace ddp::launcher;
using namespace std::chrono_literals;

TEST_CASE("flag parsers: seconds as whole, fractional or exponent text, 0 to 1e7", "[flag_parsers]") {
  CHECK(parse_seconds("30") == 30s);
  CHECK(parse_seconds("2.5") == 2500ms);
  CHECK(parse_seconds("1e3") == 1000s);
  CHECK(parse_seconds("0") == 0ms);
  CHECK(parse_seconds("0.0009") == 0ms);  // truncated to whole milliseconds
  CHECK(parse_seconds("1e7") == std::chrono::milliseconds(10'000'000'000));
  for (const char* bad : {"", "-1", "1e8", "30s", " 30", "nan", "inf", "1,5"}) {
    INFO(bad);
    CHECK(parse_seconds(bad) == std::nullopt);
  }
}

TEST_CASE("flag parsers: whole numbers of up to 9 digits, and comma lists", "[flag_parsers]") {
  CHECK(parse_whole_number("--node_rank", "42") == 42);
  CHECK(parse_whole_number("--node_rank", "-3") == -3);
  CHECK(parse_whole_number("--node_rank", "999999999") == 999999999);
  for (const char* bad : {"", "-", "1.0", "1234567890", "+1", "x1"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_whole_number("--node_rank", bad),
                      "--node_rank=" + std::string(bad) + " is not a whole number");
  }
  using List = std::vector<std::string>;
  CHECK(split_list("a,b,c") == List{"a", "b", "c"});
  CHECK(split_list("") == List{});
  CHECK(split_list("a,") == List{"a"});
  CHECK(split_list("a,,b") == List{"a", "", "b"});
}

TEST_CASE("flag parsers: --nnodes is N or MIN:MAX", "[flag_parsers]") {
  const NodeRange one = parse_nnodes("2");
  CHECK(one.min == 2);
  CHECK(one.max == 2);
  const NodeRange range = parse_nnodes("1:4");
  CHECK(range.min == 1);
  CHECK(range.max == 4);
  CHECK(parse_nnodes("4:1").min == 4);  // a shape check only: validate() refuses MIN > MAX
  for (const char* bad : {"", ":", "1:", ":4", "1:2:3", "a", "-1", "1-4"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_nnodes(bad), Contains("--nnodes=" + std::string(bad) + " is not N or MIN:MAX"));
  }
}

TEST_CASE("flag parsers: --nproc_per_node as a number or the devices the environment shows", "[flag_parsers]") {
  const NvidiaDriverProbe driver = [] { return std::string(); };  // a GPU node
  CHECK(parse_nproc("8", map_env({}), driver) == 8);
  CHECK(parse_nproc("gpu", map_env(Environment{{"CUDA_VISIBLE_DEVICES", "0,1,3"}}), driver) == 3);
  CHECK(parse_nproc("auto", map_env(Environment{{"CUDA_VISIBLE_DEVICES", "2"}}), driver) == 1);
  CHECK(parse_nproc("xpu", map_env(Environment{{"ZE_AFFINITY_MASK", "0,1"}}), driver) == 2);
  // No GPU (an empty or -1 CUDA_VISIBLE_DEVICES hides them all): auto takes the XPUs.
  CHECK(parse_nproc("auto", map_env(Environment{{"CUDA_VISIBLE_DEVICES", "-1"}, {"ZE_AFFINITY_MASK", "0"}}), driver) ==
        1);
  CHECK_THROWS_WITH(parse_nproc("gpu", map_env(Environment{{"CUDA_VISIBLE_DEVICES", ""}}), driver),
                    Contains("--nproc_per_node=gpu but no GPU is visible") && Contains("use cpu/auto"));
  CHECK_THROWS_WITH(parse_nproc("xpu", map_env(Environment{{"ZE_AFFINITY_MASK", ""}}), driver),
                    Contains("--nproc_per_node=xpu but no Intel XPU is visible"));
  CHECK(parse_nproc("cpu", map_env({}), driver) >= 1);
  for (const char* bad : {"", "two", "-1", "GPU", "1.5"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_nproc(bad, map_env({}), driver), UsageError);
  }
}

// Issue 42: a container started without --gpus inherits CUDA_VISIBLE_DEVICES; its GPUs are not there.
TEST_CASE("flag parsers: GPUs named without an NVIDIA driver do not count", "[flag_parsers]") {
  const NvidiaDriverProbe no_driver = [] { return std::string("no NVIDIA driver: no /dev/nvidiactl"); };
  const auto env = map_env(Environment{{"CUDA_VISIBLE_DEVICES", "0,3"}});
  CHECK_THROWS_WITH(parse_nproc("gpu", env, no_driver),
                    Contains("--nproc_per_node=gpu but CUDA_VISIBLE_DEVICES=0,3 names 2 GPU(s) and no NVIDIA driver") &&
                        Contains("--gpus") && Contains("--nproc_per_node=N"));
  // auto counts as torch.accelerator does: no usable GPU, no XPU → the CPUs.
  const auto cpus_env = map_env(Environment{{"CUDA_VISIBLE_DEVICES", "0,3"}, {"ZE_AFFINITY_MASK", ""}});
  CHECK(parse_nproc("auto", cpus_env, no_driver) == parse_nproc("cpu", cpus_env, no_driver));
  // The probe is asked only when a GPU is named: no GPU keeps the "none visible" message.
  CHECK_THROWS_WITH(parse_nproc("gpu", map_env(Environment{{"CUDA_VISIBLE_DEVICES", "-1"}}), no_driver),
                    Contains("no GPU is visible"));
}

TEST_CASE("flag parsers: --redirects/--tee for every rank or as a map", "[flag_parsers]") {
  const StreamSelection all = parse_streams("--tee", "3");
  CHECK(all.all == 3);
  CHECK(all.per_rank.empty());
  const StreamSelection map = parse_streams("--redirects", "0:1,2:3");
  CHECK(map.all == 0);
  CHECK(map.per_rank == std::map<int, int>{{0, 1}, {2, 3}});
  CHECK(map.for_rank(2) == 3);
  CHECK(map.for_rank(1) == 0);
  for (const char* bad : {"", "4", "0:4", "0:1,", ",0:1", "a:1", "0:", "01"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_streams("--redirects", bad),
                      Contains("--redirects=" + std::string(bad) + " is not 0-3 or a map like 0:1,1:3"));
  }
  // A rank given twice was the last one's before: refused like any other bad map.
  CHECK_THROWS_WITH(parse_streams("--redirects", "0:1,0:2"),
                    "--redirects=0:1,0:2 names local rank 0 twice; give each rank once (1 stdout, 2 stderr, 3 both)");
  CHECK_THROWS_WITH(parse_streams("--tee", "1:3,0:1,1:3"), Contains("--tee=1:3,0:1,1:3 names local rank 1 twice"));
}

TEST_CASE("flag parsers: --rdzv_endpoint with or without a port, IPv6 in brackets", "[flag_parsers]") {
  CHECK(parse_endpoint("node0:29500").host == "node0");
  CHECK(parse_endpoint("node0:29500").port == 29500);
  CHECK(parse_endpoint("node0").port == std::nullopt);  // --master_port then stands
  CHECK(parse_endpoint("[::1]:1234").host == "::1");
  CHECK(parse_endpoint("[::1]").port == std::nullopt);
  CHECK_THROWS_WITH(parse_endpoint("::1:1234"), Contains("--rdzv_endpoint=::1:1234") && Contains("[::1]:29500"));
  CHECK_THROWS_AS(parse_endpoint("node0:70000"), UsageError);
}
