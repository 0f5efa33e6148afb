// See gpu_check.hpp.
#include "launcher/health/gpu_check.hpp"

#include <cctype>
#include <sstream>

#include <fmt/format.h>

namespace ddp::launcher {
namespace {

bool valid_id(const std::string& id) {
  if (id.empty()) return false;
  if (id.rfind("GPU-", 0) == 0 || id.rfind("MIG-", 0) == 0) return true;
  for (char ch : id) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return false;
  }
  return true;
}

CheckResult result(CheckResult::Verdict verdict, std::string summary) {
  return CheckResult{"GPUs", verdict, std::move(summary), {}};
}

}  // namespace

std::optional<std::vector<std::string>> visible_gpus(const std::optional<std::string>& cvd) {
  if (!cvd) return std::nullopt;
  std::vector<std::string> ids;
  std::istringstream in(*cvd);
  for (std::string id; std::getline(in, id, ',');) {
    const auto first = id.find_first_not_of(" \t");
    id = first == std::string::npos ? "" : id.substr(first, id.find_last_not_of(" \t") - first + 1);
    if (!valid_id(id)) break;  // CUDA ignores the rest of the list too
    ids.push_back(id);
  }
  return ids;
}

CheckResult check_gpus(GpuDevices& devices, const std::optional<std::string>& cvd) {
  if (const std::string why = devices.unavailable(); !why.empty()) {
    return result(CheckResult::Verdict::Skipped, "no GPU: skipped (" + why + ")");
  }
  const int count = devices.count();
  if (count == 0) return result(CheckResult::Verdict::Skipped, "no GPU: skipped (the driver sees no device)");
  std::vector<std::string> ids;
  if (const auto visible = visible_gpus(cvd)) {
    ids = *visible;
    if (ids.empty()) {
      return result(CheckResult::Verdict::Skipped, "no GPU visible: skipped (CUDA_VISIBLE_DEVICES=" + *cvd + ")");
    }
  } else {
    for (int i = 0; i < count; ++i) ids.push_back(std::to_string(i));
  }
  for (const std::string& id : ids) {
    const GpuProbe p = devices.probe(id);
    if (!p.error.empty()) {
      return result(CheckResult::Verdict::Failed, fmt::format("GPU {} does not answer: {}", id, p.error));
    }
    if (p.uncorrected_ecc > 0) {
      return result(CheckResult::Verdict::Failed,
                    fmt::format("GPU {} has {} uncorrectable ECC error(s) since the driver loaded; drain this node or "
                                "reset the GPU",
                                id, p.uncorrected_ecc));
    }
  }
  std::string list;
  for (const std::string& id : ids) list += (list.empty() ? "" : ",") + id;
  return result(CheckResult::Verdict::Healthy,
                fmt::format("{} GPU(s) answer ({}), no uncorrectable ECC error", ids.size(), list));
}

}  // namespace ddp::launcher
