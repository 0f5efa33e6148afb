// See stream_overlap.hpp.
#include "runtime/stream_overlap.hpp"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>

namespace ddp::runtime {

void StreamOverlap::run(const std::function<void()>& body) {
  at::cuda::CUDAEvent inputs_ready;
  inputs_ready.record(c10::cuda::getCurrentCUDAStream(side_.device_index()));
  inputs_ready.block(side_);
  pending_ = true;
  c10::cuda::CUDAStreamGuard on_side(side_);
  body();
}

void StreamOverlap::join() {
  if (!pending_) return;
  pending_ = false;
  at::cuda::CUDAEvent side_done;
  side_done.record(side_);
  side_done.block(c10::cuda::getCurrentCUDAStream(side_.device_index()));
}

}  // namespace ddp::runtime
