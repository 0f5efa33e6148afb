// Work on a side CUDA stream that overlaps the caller's (Communicator::overlapped for the GPU
// communicators): run() orders the side stream after what the caller's current stream has queued
// and runs a body with the side stream as the current one; join() makes the caller's current
// stream wait for everything run() queued. Built only with CUDA (nccl.cmake).
// Not thread-safe: the communicator calling it serialises run() and join().
#pragma once

#include <functional>

#include <c10/cuda/CUDAStream.h>

namespace ddp::runtime {

class StreamOverlap {
 public:
  explicit StreamOverlap(c10::cuda::CUDAStream side) : side_(side) {}

  // Blocks only as long as body does; CUDA errors throw c10::Error, body's exceptions propagate.
  void run(const std::function<void()>& body);
  // Does nothing when run() was not called since the last join. CUDA errors throw c10::Error.
  void join();

 private:
  c10::cuda::CUDAStream side_;
  bool pending_ = false;
};

}  // namespace ddp::runtime
