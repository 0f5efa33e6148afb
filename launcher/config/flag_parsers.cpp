// One flag's text → a value; see flag_parsers.hpp.
#include "launcher/config/flag_parsers.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/log.hpp"
#include "common/worker_env.hpp"
#include "launcher/config/cpu_budget.hpp"

namespace ddp::launcher {
namespace {

// Whether `s` is min_digits..max_digits decimal digits and nothing else.
bool is_digits(std::string_view s, std::size_t min_digits, std::size_t max_digits) {
  return s.size() >= min_digits && s.size() <= max_digits &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// "0".."3", the stream bits of --redirects/--tee.
bool is_stream_bits(std::string_view s) {
  return s.size() == 1 && s[0] >= '0' && s[0] <= '3';
}

// The GPUs CUDA would number, and where they were counted: CUDA_VISIBLE_DEVICES's entries when it
// is set ("" and "-1" hide them all), else the /dev/nvidiaN nodes.
struct GpuCount {
  int count = 0;
  std::string source;  // "CUDA_VISIBLE_DEVICES=0,3" or "/dev/nvidia*"
};

GpuCount count_gpus(const EnvLookup& env) {
  if (auto cvd = env(worker_env::kCudaVisibleDevices)) {
    const std::string source = fmt::format("{}={}", worker_env::kCudaVisibleDevices, *cvd);
    if (cvd->empty() || *cvd == "-1") return {0, source};
    return {static_cast<int>(std::count(cvd->begin(), cvd->end(), ',')) + 1, source};
  }
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("nvidia", 0) == 0 && is_digits(std::string_view(name).substr(6), 1, name.size())) ++n;
  }
  return {n, "/dev/nvidia*"};
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_seconds(std::string_view text) {
  double seconds = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, seconds);
  if (ec != std::errc() || stop != end || !(seconds >= 0 && seconds <= 1e7)) return std::nullopt;
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
}

std::optional<std::size_t> parse_bytes(std::string_view text) {
  std::uint64_t number = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, number);
  if (ec != std::errc() || stop == text.data()) return std::nullopt;
  const std::string_view unit = text.substr(static_cast<std::size_t>(stop - text.data()));
  static constexpr std::pair<std::string_view, int> kUnits[] = {{"", 0},     {"B", 0},   {"K", 10},  {"KB", 10},
                                                                {"KiB", 10}, {"M", 20},  {"MB", 20}, {"MiB", 20},
                                                                {"G", 30},   {"GB", 30}, {"GiB", 30}};
  for (const auto& [name, shift] : kUnits) {
    if (unit != name) continue;
    if (number > (std::uint64_t{1} << (50 - shift))) return std::nullopt;
    return static_cast<std::size_t>(number << shift);
  }
  return std::nullopt;
}

int parse_whole_number(std::string_view flag, const std::string& text) {
  if (!is_digits(std::string_view(text).substr(!text.empty() && text[0] == '-' ? 1 : 0), 1, 9)) {
    throw UsageError(fmt::format("{}={} is not a whole number", flag, text));
  }
  return std::stoi(text);
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  return items;
}

NodeRange parse_nnodes(const std::string& text) {
  const auto colon = text.find(':');
  const std::string min_text = text.substr(0, colon);
  const std::string max_text = colon == std::string::npos ? min_text : text.substr(colon + 1);
  if (!is_digits(min_text, 1, 9) || !is_digits(max_text, 1, 9)) {
    throw UsageError(fmt::format("--nnodes={} is not N or MIN:MAX (e.g. --nnodes=2 or --nnodes=1:4)", text));
  }
  return {std::stoi(min_text), std::stoi(max_text)};
}

int parse_nproc(const std::string& text, const EnvLookup& env, const NvidiaDriverProbe& nvidia_driver) {
  // The CPUs this process may use (affinity, the cgroup's limit), not the host's; `why` says why
  // auto counted CPUs.
  const auto cpus = [&text](std::string_view why) {
    const CpuBudget budget = read_cpu_budget();
    log::info("--nproc_per_node={}: {} worker(s), one per CPU this process may use: {}{}", text, budget.usable(),
              budget.describe(), why);
    return budget.usable();
  };
  if (text == "cpu") return cpus("");
  // gpu and xpu: the devices counted, or where none was found.
  const auto devices = [&text](int count, std::string_view device, std::string_view where) {
    if (count == 0) {
      throw UsageError(fmt::format("--nproc_per_node={} but no {} is visible ({}); give a number or use cpu/auto", text,
                                   device, where));
    }
    log::info("--nproc_per_node={}: {} {}(s) from {}", text, count, device, where);
    return count;
  };
  // GPUs named (by CUDA_VISIBLE_DEVICES or /dev/nvidiaN) count only with a driver to run them, as
  // torch.cuda.is_available() would say.
  const GpuCount gpus = count_gpus(env);
  const std::string no_driver = gpus.count > 0 ? nvidia_driver() : "";
  if (text == "gpu") {
    if (!no_driver.empty()) {
      throw UsageError(
          fmt::format("--nproc_per_node=gpu but {} names {} GPU(s) and {}; give the job the GPUs "
                      "(docker run --gpus all, or install the NVIDIA driver), or give "
                      "--nproc_per_node=N or cpu",
                      gpus.source, gpus.count, no_driver));
    }
    return devices(gpus.count, "GPU", gpus.count > 0 ? gpus.source : "CUDA_VISIBLE_DEVICES, /dev/nvidia*");
  }
  if (text == "xpu") {
    return devices(count_xpus(env), "Intel XPU",
                   "ZE_AFFINITY_MASK, /sys/class/drm render nodes of vendor 0x8086 with the xe or i915 driver");
  }
  if (text == "auto") {
    if (gpus.count > 0 && no_driver.empty()) return devices(gpus.count, "GPU", gpus.source);
    if (const int xpus = count_xpus(env); xpus > 0)
      return devices(xpus, "Intel XPU", "ZE_AFFINITY_MASK, /sys/class/drm");
    return cpus(gpus.count > 0 ? fmt::format("; no usable GPU ({} but {}) and no Intel XPU", gpus.source, no_driver)
                               : std::string("; no GPU or Intel XPU visible"));
  }
  if (is_digits(text, 1, 9)) return std::stoi(text);
  throw UsageError(fmt::format("--nproc_per_node={} is not a number, gpu, xpu, cpu or auto", text));
}

int count_xpus(const EnvLookup& env, const std::string& sysfs_drm) {
  if (auto mask = env("ZE_AFFINITY_MASK")) {
    return mask->empty() ? 0 : static_cast<int>(std::count(mask->begin(), mask->end(), ',')) + 1;
  }
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(sysfs_drm, ec)) {
    if (e.path().filename().string().rfind("renderD", 0) != 0) continue;
    std::ifstream vendor_file(e.path() / "device" / "vendor");
    std::string vendor;
    vendor_file >> vendor;
    const std::string driver = std::filesystem::read_symlink(e.path() / "device" / "driver", ec).filename().string();
    if (vendor == "0x8086" && (driver == "xe" || driver == "i915")) ++n;
  }
  return n;
}

std::vector<std::string> parse_line_filters(const std::string& text) {
  std::vector<std::string> items(1);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') {
      items.back().push_back(text[i]);
    } else if (i + 1 < text.size() && text[i + 1] == ',') {
      items.back().push_back(',');  // ",,": a literal comma
      ++i;
    } else {
      items.emplace_back();
    }
  }
  return items;
}

StreamSelection parse_streams(std::string_view flag, const std::string& text) {
  StreamSelection s;
  if (is_stream_bits(text)) {
    s.all = text[0] - '0';
    return s;
  }
  // A map "RANK:BITS,RANK:BITS,...": not split_list(), which would let "" and a trailing comma pass.
  for (std::size_t start = 0;;) {
    const auto comma = std::min(text.find(',', start), text.size());
    const std::string_view item = std::string_view(text).substr(start, comma - start);
    const auto colon = item.find(':');
    if (colon == std::string_view::npos || !is_digits(item.substr(0, colon), 1, 9) ||
        !is_stream_bits(item.substr(colon + 1))) {
      throw UsageError(fmt::format("{}={} is not 0-3 or a map like 0:1,1:3 (1 stdout, 2 stderr, 3 both)", flag, text));
    }
    const int rank = std::stoi(std::string(item.substr(0, colon)));
    if (!s.per_rank.emplace(rank, item[colon + 1] - '0').second) {
      throw UsageError(fmt::format("{}={} names local rank {} twice; give each rank once (1 stdout, 2 stderr, 3 both)",
                                   flag, text, rank));
    }
    if (comma == text.size()) return s;
    start = comma + 1;
  }
}

Endpoint parse_endpoint(std::string_view text) {
  return parse_host_port(text, {.name = "--rdzv_endpoint", .fix = "e.g. --rdzv_endpoint=node0:29500 or [::1]:29500"});
}

}  // namespace ddp::launcher
