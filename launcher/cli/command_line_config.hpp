// The values the command line gave (cli_options.hpp) turned into a LaunchConfig: the text of
// each flag parsed (flag_parsers.hpp, rdzv_conf.hpp), signal names resolved, --standalone and
// the Slurm defaults applied. The result is not yet validated (validate.hpp).
#pragma once

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/cli/cli_options.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/config/nvidia_driver.hpp"
#include "launcher/rdzv/rendezvous_backend.hpp"

namespace ddp::launcher {

// Builds the configuration from `values`; `env` supplies the GPU count for --nproc_per_node=gpu,
// TORCHELASTIC_SIGNALS_TO_HANDLE and the SLURM_* variables. Without an explicit --nnodes,
// --node_rank or --master_addr, SLURM_JOB_ID turns on the Slurm defaults (slurm.hpp). Throws
// UsageError (one line naming the flag, the value and the fix) for text that does not parse.
// --rdzv_backend chooses among `backends` (rdzv_backend_choice.hpp). `nvidia_driver` says whether
// the GPUs CUDA_VISIBLE_DEVICES names can run (parse_nproc, flag_parsers.hpp); tests fake it.
LaunchConfig to_launch_config(CommandLineValues values, const EnvLookup& env, const std::vector<BackendKind>& backends,
                              const NvidiaDriverProbe& nvidia_driver = nvidia_driver_missing);

}  // namespace ddp::launcher
