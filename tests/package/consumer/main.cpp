// A program built against the installed ddplaunch package: a process group of one rank over an
// in-memory store, a Linear layer wrapped in DistributedDataParallel, one forward and backward.
// Prints "consumer: ok" when the gradient arrived; exits 1 with the reason otherwise.
#include <ddplaunch/distributed_data_parallel.hpp>
#include <ddplaunch/process_group.hpp>
#include <ddplaunch/rendezvous/memory_store.hpp>

#include <torch/nn/modules/linear.h>

#include <exception>
#include <iostream>
#include <memory>

namespace rt = ddp::runtime;

int main() {
  try {
    rt::ProcessGroup group(rt::InitOptions()
                               .dist_env(rt::DistEnv{})
                               .store(std::make_shared<ddp::rendezvous::MemoryStore>())
                               .backend(rt::Backend::Cpu));
    torch::nn::Linear linear(4, 2);
    rt::DistributedDataParallel ddp(linear, {}, group.communicator());

    torch::Tensor x = torch::ones({3, 4});
    torch::Tensor loss = ddp(x).pow(2).mean();
    loss.backward();

    // DDP over one rank averages nothing: the gradient must be the plain one,
    // d/dW mean((x W^T + b)^2) = 2 / numel * (x W^T + b)^T x.
    const torch::Tensor weight = linear->weight.detach();
    const torch::Tensor out = x.matmul(weight.t()) + linear->bias.detach();
    const torch::Tensor expected = 2.0 / static_cast<double>(out.numel()) * out.t().matmul(x);
    const torch::Tensor& grad = linear->weight.grad();
    if (!grad.defined()) {
      std::cerr << "consumer: the weight has no gradient after backward\n";
      return 1;
    }
    if (!torch::allclose(grad, expected)) {
      std::cerr << "consumer: wrong weight gradient after backward: expected\n"
                << expected << "\ngot\n"
                << grad << "\n";
      return 1;
    }
    std::cout << "consumer: ok (world size " << group.world_size() << ", backend " << rt::to_string(group.backend())
              << ")\n";
    group.close();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 1;
  }
}
