// The torchrun worker-environment contract, written once: the names of the variables a launcher
// hands each worker (torchrun's own, so PyTorch's env:// init and our runtime both read them) and
// the one builder that sets them. Used by the launcher's worker specs and by spawn(); the
// runtime's dist_env reads the same constants back. The names ddplaunch's worker specs set beside
// the contract are here too, so code names every worker variable through a constant of this file.
#pragma once

#include <string>

#include "ddplaunch/common/env_lookup.hpp"

namespace ddp::worker_env {

inline constexpr const char* kRank = "RANK";
inline constexpr const char* kLocalRank = "LOCAL_RANK";
inline constexpr const char* kWorldSize = "WORLD_SIZE";
inline constexpr const char* kLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kGroupRank = "GROUP_RANK";
inline constexpr const char* kGroupWorldSize = "GROUP_WORLD_SIZE";
inline constexpr const char* kRoleRank = "ROLE_RANK";
inline constexpr const char* kRoleName = "ROLE_NAME";
inline constexpr const char* kRoleWorldSize = "ROLE_WORLD_SIZE";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
inline constexpr const char* kMasterPort = "MASTER_PORT";
inline constexpr const char* kRestartCount = "TORCHELASTIC_RESTART_COUNT";
inline constexpr const char* kMaxRestarts = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr const char* kRunId = "TORCHELASTIC_RUN_ID";
inline constexpr const char* kUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE";
inline constexpr const char* kErrorFile = "TORCHELASTIC_ERROR_FILE";
// Defaults a launcher sets only where the user has not chosen.
inline constexpr const char* kNcclAsyncErrorHandling = "TORCH_NCCL_ASYNC_ERROR_HANDLING";
inline constexpr const char* kOmpNumThreads = "OMP_NUM_THREADS";

// Set by ddplaunch's worker specs (launcher/workers/worker_spec.cpp), outside apply(): they depend
// on the launcher's flags and on what its watch serves. The collective-progress table's variable,
// DDPLAUNCH_PROGRESS, is named with its format in collective_progress.hpp.

// The signals the launcher forwards, told as torchrun tells its workers (it exports
// --signals_to_handle to its agent's environment, which workers inherit); also the flag's default.
inline constexpr const char* kSignalsToHandle = "TORCHELASTIC_SIGNALS_TO_HANDLE";
// The file timers' named pipe (torch.distributed.elastic.timer.FileTimerClient).
inline constexpr const char* kTimerFile = "TORCHELASTIC_TIMER_FILE";
// A Python worker's worker-server socket; its hook (python/ddplaunch/worker_hook) reads and removes it.
inline constexpr const char* kWorkerSocket = "DDPLAUNCH_WORKER_SOCKET";
// The hook's directory goes first on a Python worker's PYTHONPATH.
inline constexpr const char* kPythonPath = "PYTHONPATH";
// One device per worker under --virtual_local_rank; also read from the launcher's environment
// (which GPUs it may use) and by the runtime's messages.
inline constexpr const char* kCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";
// The Flight Recorder's buffer and dump files, under torch's current names and the older NCCL ones
// (torch reads either; a user's setting under either stays as it is).
inline constexpr const char* kFrBufferSize = "TORCH_FR_BUFFER_SIZE";
inline constexpr const char* kNcclTraceBufferSize = "TORCH_NCCL_TRACE_BUFFER_SIZE";
inline constexpr const char* kFrDumpTempFile = "TORCH_FR_DUMP_TEMP_FILE";
inline constexpr const char* kNcclDebugInfoTempFile = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE";

// What one worker is told. The role defaults follow torchrun with a single role.
struct WorkerEnv {
  int rank = 0;
  int local_rank = 0;  // the value LOCAL_RANK shows (0 under --virtual_local_rank)
  int world_size = 1;
  int local_world_size = 1;
  int group_rank = 0;  // the node's rank
  int group_world_size = 1;
  std::string role_name = "default";
  std::string master_addr = "127.0.0.1";  // the store's address as workers dial it, no brackets
  int master_port = 0;
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id = "none";
  std::string error_file;  // "" sets TORCHELASTIC_ERROR_FILE empty, as torchrun without a log dir
};

// Sets every variable of the contract in `env` (overwriting) and the defaults where unset:
// TORCH_NCCL_ASYNC_ERROR_HANDLING=1, and OMP_NUM_THREADS=1 when local_world_size > 1.
// TORCHELASTIC_USE_AGENT_STORE=True: the store at MASTER_ADDR:MASTER_PORT is the launcher's.
// Pure; never throws.
void apply(Environment& env, const WorkerEnv& worker);

}  // namespace ddp::worker_env
