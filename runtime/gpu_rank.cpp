// See gpu_rank.hpp.
#include "runtime/gpu_rank.hpp"

#include <string>

#include <c10/cuda/CUDAFunctions.h>

#include "ddplaunch/communicator.hpp"

namespace ddp::runtime {

int gpu_rank_device(int rank, int world_size, int requested, const char* options_name) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw CommunicatorError("bad rank " + std::to_string(rank) + " for world size " + std::to_string(world_size));
  const int count = c10::cuda::device_count();
  const int device = requested < 0 ? (count > 0 ? c10::cuda::current_device() : -1) : requested;
  if (device < 0 || device >= count)
    throw CommunicatorError("rank " + std::to_string(rank) + ": CUDA device " + std::to_string(device) +
                            " does not exist (this host has " + std::to_string(count) + "); set " + options_name +
                            "::device to 0.." + std::to_string(count - 1) +
                            ", usually the local rank, or use the CPU backend");
  return device;
}

}  // namespace ddp::runtime
