// The argument checks both GPU communicators (nccl, nccl-c10d) make at construction, in one place.
// Built only with CUDA (nccl.cmake).
#pragma once

namespace ddp::runtime {

// Checks that `rank` is a rank of `world_size` and resolves the CUDA device (`requested` < 0: the
// current device). Throws CommunicatorError naming the value and, for the device, the range to
// choose from in `options_name` (e.g. "NcclCommunicatorOptions"). Thread-safe.
int gpu_rank_device(int rank, int world_size, int requested, const char* options_name);

}  // namespace ddp::runtime
