// The text of one flag turned into a value: whole numbers, seconds, node ranges, worker counts,
// stream selections, endpoints and comma lists. These check the *form* of the text only; whether
// the value makes sense for the job (--master_port in range, a rank below nnodes) is validate()'s
// business (validate.hpp), so that rule holds however the LaunchConfig was filled in. (A port
// inside HOST:PORT text is part of its spelling: 0..65535, common/host_port.hpp.)
//
// Hand-written matchers instead of std::regex: compiling a std::regex costs tens of
// microseconds, and parsing the command line sits on every launch's critical path.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/host_port.hpp"
#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/config/nvidia_driver.hpp"

namespace ddp::launcher {

// What a number of seconds looks like, for messages.
inline constexpr std::string_view kSecondsExpected = "a number of seconds in 0..1e7 (e.g. 30 or 2.5)";

// "30", "2.5", "1e3" → milliseconds (truncated). nullopt unless the whole text is a finite number
// in 0..1e7 (about 115 days, so the milliseconds cannot overflow). Pure; never throws.
std::optional<std::chrono::milliseconds> parse_seconds(std::string_view text);

inline constexpr std::string_view kBytesExpected = "a size such as 512MiB, 2GiB or 1073741824 (bytes)";
// A size in bytes: digits, optionally followed by B, KiB, MiB, GiB (or K, M, G, KB, MB, GB: the
// same powers of 1024). nullopt for anything else or above 2^50. Pure.
std::optional<std::size_t> parse_bytes(std::string_view text);

// "42", "-3" → the number (at most 9 digits). Throws UsageError "FLAG=TEXT is not a whole number".
int parse_whole_number(std::string_view flag, const std::string& text);

// "a,b,c" → {"a", "b", "c"}; "" → {}; a trailing comma adds no item. Never throws.
std::vector<std::string> split_list(const std::string& text);

// --nnodes: "N" or "MIN:MAX". Throws UsageError for any other shape; whether the range is
// usable (1 <= MIN <= MAX) is checked by validate().
struct NodeRange {
  int min = 1;
  int max = 1;
};
NodeRange parse_nnodes(const std::string& text);

// --nproc_per_node: a number, or gpu (the visible GPUs), xpu (the visible Intel XPUs), cpu (the
// CPUs this process may use: cpu_budget.hpp) or auto (GPUs if any, else XPUs, else cpu, as
// torchrun's torch.accelerator does); each keyword logs one line saying how it counted ("2 GPU(s)
// from CUDA_VISIBLE_DEVICES=0,3"). GPUs are counted from CUDA_VISIBLE_DEVICES in `env`, else from
// /dev/nvidiaN, and count only when `nvidia_driver` finds the driver (torch.cuda.is_available()):
// without it, gpu throws and auto goes on to XPUs and CPUs. XPUs are counted as in count_xpus().
// Throws UsageError for other text, and for gpu or xpu when none is visible (torchrun: "Cuda is
// not available." / "Xpu is not available."). Blocks only on reading /dev, sysfs and /proc.
int parse_nproc(const std::string& text, const EnvLookup& env,
                const NvidiaDriverProbe& nvidia_driver = nvidia_driver_missing);

// Intel XPUs as torch.xpu.device_count() would see them without loading Level Zero: the entries
// of ZE_AFFINITY_MASK in `env` when set (one device each; "" or none: 0), else the DRM render
// nodes whose PCI vendor is Intel (0x8086) and whose kernel driver is `xe` or `i915` under
// `sysfs_drm` (/sys/class/drm). Never throws; reads only sysfs.
int count_xpus(const EnvLookup& env, const std::string& sysfs_drm = "/sys/class/drm");

// --duplicate_stdout_filters / --duplicate_stderr_filters, as torchrun's comma_separated_list:
// split at ',', where ",," is a literal comma ("a,,b" → {"a,b"}). As in torchrun, an empty item
// ("" or "a,") is a filter that every line matches. Pure; never throws.
std::vector<std::string> parse_line_filters(const std::string& text);

// --redirects / --tee: "0".."3" for every local rank (1 stdout, 2 stderr, 3 both), or a map
// "RANK:BITS,RANK:BITS", each rank once. Throws UsageError naming `flag` and the text (and the
// rank given twice).
StreamSelection parse_streams(std::string_view flag, const std::string& text);

// --rdzv_endpoint for the built-in store: "host", "host:port", "[v6]" or "[v6]:port"
// (common/host_port.hpp). The port is empty when the text has none (--master_port then stands).
// Throws UsageError naming --rdzv_endpoint, the text and the fix.
using Endpoint = HostPort;
Endpoint parse_endpoint(std::string_view text);

}  // namespace ddp::launcher
