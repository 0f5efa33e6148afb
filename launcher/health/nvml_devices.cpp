// See nvml_devices.hpp. The few NVML entry points used are declared here rather than taken from
// nvml.h, so the build needs no CUDA toolkit; their signatures and the constants below are NVML's
// stable C ABI (the _v2 names where NVML versioned them).
#include "launcher/health/nvml_devices.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "launcher/config/nvidia_driver.hpp"

namespace ddp::launcher {
namespace {

using NvmlReturn = int;
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kNvmlVolatileEcc = 0;             // NVML_VOLATILE_ECC: since the driver loaded

}  // namespace

struct NvmlDevices::Api {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  const char* (*error_string)(NvmlReturn);
  NvmlReturn (*count)(unsigned*);
  NvmlReturn (*by_index)(unsigned, NvmlDevice*);
  NvmlReturn (*by_uuid)(const char*, NvmlDevice*);
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*);
  NvmlReturn (*ecc)(NvmlDevice, int, int, unsigned long long*);
};

NvmlDevices::NvmlDevices() {
  // Without the driver NVML cannot answer, and looking for the library (dlopen tries some 70
  // paths) would cost every round about a millisecond for nothing.
  if (std::string missing = nvidia_driver_missing(); !missing.empty()) {
    unavailable_ = std::move(missing);
    return;
  }
  library_ = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library_) {
    unavailable_ = "libnvidia-ml.so.1 not found";
    return;
  }
  const auto sym = [this](const char* name) { return ::dlsym(library_, name); };
  api_ = std::make_unique<Api>(Api{reinterpret_cast<decltype(Api::init)>(sym("nvmlInit_v2")),
                                   reinterpret_cast<decltype(Api::shutdown)>(sym("nvmlShutdown")),
                                   reinterpret_cast<decltype(Api::error_string)>(sym("nvmlErrorString")),
                                   reinterpret_cast<decltype(Api::count)>(sym("nvmlDeviceGetCount_v2")),
                                   reinterpret_cast<decltype(Api::by_index)>(sym("nvmlDeviceGetHandleByIndex_v2")),
                                   reinterpret_cast<decltype(Api::by_uuid)>(sym("nvmlDeviceGetHandleByUUID")),
                                   reinterpret_cast<decltype(Api::memory)>(sym("nvmlDeviceGetMemoryInfo")),
                                   reinterpret_cast<decltype(Api::ecc)>(sym("nvmlDeviceGetTotalEccErrors"))});
  if (!api_->init || !api_->shutdown || !api_->error_string || !api_->count || !api_->by_index || !api_->by_uuid ||
      !api_->memory || !api_->ecc) {
    unavailable_ = "libnvidia-ml.so.1 lacks the NVML functions needed";
    return;
  }
  if (const NvmlReturn rc = api_->init(); rc != kNvmlSuccess) {
    unavailable_ = fmt::format("NVML: {}", api_->error_string(rc));  // e.g. "Driver Not Loaded"
    return;
  }
  initialised_ = true;
}

NvmlDevices::~NvmlDevices() {
  if (initialised_) api_->shutdown();
  if (library_) ::dlclose(library_);
}

int NvmlDevices::count() {
  unsigned n = 0;
  if (!initialised_ || api_->count(&n) != kNvmlSuccess) return 0;
  return static_cast<int>(n);
}

GpuProbe NvmlDevices::probe(const std::string& id) {
  GpuProbe p;
  NvmlDevice device = nullptr;
  const bool by_uuid = id.rfind("GPU-", 0) == 0 || id.rfind("MIG-", 0) == 0;
  NvmlReturn rc = by_uuid ? api_->by_uuid(id.c_str(), &device)
                          : api_->by_index(static_cast<unsigned>(std::strtoul(id.c_str(), nullptr, 10)), &device);
  NvmlMemory memory{};
  if (rc == kNvmlSuccess) rc = api_->memory(device, &memory);
  if (rc != kNvmlSuccess) {
    p.error = api_->error_string(rc);  // e.g. "GPU is lost", "Invalid Argument"
    return p;
  }
  unsigned long long ecc = 0;
  // NOT_SUPPORTED on GPUs without ECC (or with it off): nothing to report.
  if (api_->ecc(device, kNvmlMemoryErrorUncorrected, kNvmlVolatileEcc, &ecc) == kNvmlSuccess) {
    p.uncorrected_ecc = static_cast<long long>(ecc);
  }
  return p;
}

}  // namespace ddp::launcher
