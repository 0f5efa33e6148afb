// check_gpus() against a fake GpuDevices: no library or no device is "no GPU: skipped"; the
// visible devices (CUDA_VISIBLE_DEVICES, indices or UUIDs, up to an invalid entry) are the ones
// probed; a device that does not answer or reports uncorrectable ECC errors fails the check.
#include "launcher/health/gpu_check.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "launcher/health/nvml_devices.hpp"

namespace {

using namespace ddp::launcher;

class FakeGpus : public GpuDevices {
 public:
  std::string why_unavailable;
  int devices = 0;
  std::map<std::string, GpuProbe> answers;  // by id; missing ids answer cleanly
  std::vector<std::string> probed;

  std::string unavailable() override { return why_unavailable; }
  int count() override { return devices; }
  GpuProbe probe(const std::string& id) override {
    probed.push_back(id);
    const auto it = answers.find(id);
    return it == answers.end() ? GpuProbe{} : it->second;
  }
};

}  // namespace

TEST_CASE("without NVML or without a device the check is skipped, never failed") {
  FakeGpus none;
  none.why_unavailable = "libnvidia-ml.so.1 not found";
  CheckResult r = check_gpus(none, std::nullopt);
  CHECK(r.verdict == CheckResult::Verdict::Skipped);
  CHECK(r.summary == "no GPU: skipped (libnvidia-ml.so.1 not found)");
  FakeGpus zero;
  r = check_gpus(zero, std::string("0"));
  CHECK(r.verdict == CheckResult::Verdict::Skipped);
  CHECK(r.summary.rfind("no GPU: skipped", 0) == 0);
}

TEST_CASE("this machine's NVML: no GPU here is a clean skip") {
  NvmlDevices real;
  const CheckResult r = check_gpus(real, std::nullopt);
  if (real.unavailable().empty() && real.count() > 0) {
    CHECK(r.verdict != CheckResult::Verdict::Skipped);  // [gpu] machine: the devices were probed
  } else {
    CHECK(r.verdict == CheckResult::Verdict::Skipped);
    CHECK(r.summary.rfind("no GPU: skipped (", 0) == 0);
  }
}

TEST_CASE("without the driver's device node NVML is not looked for, and the skip says why") {
  if (::access("/dev/nvidiactl", F_OK) == 0 || ::access("/dev/dxg", F_OK) == 0) return;  // a GPU machine
  NvmlDevices real;
  CHECK(real.unavailable() == "no NVIDIA driver: no /dev/nvidiactl");
  CHECK(check_gpus(real, std::nullopt).summary == "no GPU: skipped (no NVIDIA driver: no /dev/nvidiactl)");
}

TEST_CASE("every device is probed when CUDA_VISIBLE_DEVICES is unset, only the visible ones otherwise") {
  FakeGpus gpus;
  gpus.devices = 4;
  CHECK(check_gpus(gpus, std::nullopt).verdict == CheckResult::Verdict::Healthy);
  CHECK(gpus.probed == std::vector<std::string>{"0", "1", "2", "3"});
  gpus.probed.clear();
  const CheckResult r = check_gpus(gpus, std::string("2, GPU-abc,-1,3"));
  CHECK(gpus.probed == std::vector<std::string>{"2", "GPU-abc"});
  CHECK(r.summary == "2 GPU(s) answer (2,GPU-abc), no uncorrectable ECC error");
  CHECK(check_gpus(gpus, std::string("")).verdict == CheckResult::Verdict::Skipped);
}

TEST_CASE("a device that does not answer, or has uncorrectable ECC errors, fails the check") {
  FakeGpus gpus;
  gpus.devices = 2;
  gpus.answers["1"] = GpuProbe{"GPU is lost", -1};
  CheckResult r = check_gpus(gpus, std::nullopt);
  CHECK(r.failed());
  CHECK(r.summary == "GPU 1 does not answer: GPU is lost");
  gpus.answers["1"] = GpuProbe{"", 3};
  r = check_gpus(gpus, std::string("1"));
  CHECK(r.failed());
  CHECK(r.summary.rfind("GPU 1 has 3 uncorrectable ECC error(s)", 0) == 0);
  gpus.answers["1"] = GpuProbe{"", 0};
  CHECK(check_gpus(gpus, std::string("1")).verdict == CheckResult::Verdict::Healthy);
}
