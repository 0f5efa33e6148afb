// The CPU communicator (see cpu_communicator.hpp): ring set-up through the store, the ring
// plans of each collective for ring_transfer(), reductions with torch's own kernels on chunk
// views, the choice between the TCP ring and shared memory (shm_allreduce.cpp) for allreduce,
// and failure propagation through the store.
#include "ddplaunch/cpu_communicator.hpp"

#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <ATen/ATen.h>

#include "common/host_port.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "runtime/failure_latch.hpp"
#include "runtime/ring_transfer.hpp"
#include "runtime/shm_allreduce.hpp"
#include "runtime/socket_fd.hpp"
#include "runtime/tensor_checks.hpp"

namespace ddp::runtime {
namespace {

using ddp::Error;

constexpr std::uint32_t kMagic = 0x44445052;  // "DDPR"

// The handshake a rank sends over its connection to rank+1.
struct Hello {
  std::uint32_t magic;
  std::int32_t rank;
  std::int32_t world_size;
};

// What a collective says about itself to rank+1 before moving data: ranks that disagree (another
// collective, dtype, size, root or op, or a different count of collectives so far) fail with a
// message naming both sides instead of exchanging garbage or hanging.
struct CollectiveHeader {
  std::uint32_t magic;
  std::int32_t kind;  // 1 allreduce, 2 broadcast, 3 allgather
  std::int32_t dtype;
  std::int32_t arg;  // reduce op or root
  std::int64_t numel;
  std::uint64_t seq;
};

const char* kind_name(std::int32_t kind) {
  switch (kind) {
    case 1:
      return "allreduce";
    case 2:
      return "broadcast";
    case 3:
      return "allgather";
  }
  return "an unknown collective";
}

std::string describe(const CollectiveHeader& h) {
  std::string out = std::string(kind_name(h.kind)) + " #" + std::to_string(h.seq) + " of " + std::to_string(h.numel) +
                    " " + std::string(c10::toString(static_cast<c10::ScalarType>(h.dtype))) + " elements";
  if (h.kind == 1) out += " (" + std::string(to_string(static_cast<ReduceOp>(h.arg))) + ")";
  if (h.kind == 2) out += " from root " + std::to_string(h.arg);
  return out;
}

std::string who(int rank) {
  return "rank " + std::to_string(rank);
}

// "host:port" / "[v6]:port" as a rank published it (common/host_port.hpp); port 0 is no listener.
std::pair<std::string, std::uint16_t> split_address(const std::string& addr, int rank) {
  const std::optional<HostPort> parsed = try_parse_host_port(addr);
  if (!parsed || !parsed->port || *parsed->port == 0) {
    throw CommunicatorError("rank " + std::to_string(rank) + " published a bad address '" + addr + "'");
  }
  return {parsed->host, *parsed->port};
}

int mod(int a, int n) {
  return ((a % n) + n) % n;
}

// The TCP ring allreduce of `flat` (Average adds; the caller divides).
void ring_allreduce(const torch::Tensor& flat, ReduceOp op, const RingLinks& ring, int rank, int world_size,
                    Clock::time_point deadline, const std::string& what) {
  const std::int64_t n = flat.numel();
  const std::size_t es = flat.element_size();
  TransferPlan plan;
  plan.base = static_cast<char*>(flat.data_ptr());
  plan.element_size = es;
  auto range = [&](int seg, bool reduce) {
    const auto [b, e] = ring_segment(n, world_size, mod(seg, world_size));
    return ByteRange{static_cast<std::size_t>(b) * es, static_cast<std::size_t>(e - b) * es, reduce};
  };
  // Step s of reduce-scatter sends segment r-s and reduces segment r-s-1 into place; after
  // N-1 steps segment r+1 is complete here, and the allgather steps send r+1-s and receive r-s.
  for (int s = 0; s < world_size - 1; ++s) {
    plan.sends.push_back(range(rank - s, false));
    plan.recvs.push_back(range(rank - s - 1, true));
  }
  for (int s = 0; s < world_size - 1; ++s) {
    plan.sends.push_back(range(rank + 1 - s, false));
    plan.recvs.push_back(range(rank - s, false));
  }
  plan.send_allowance = plan.sends.front().length;
  const auto options = flat.options();
  plan.reduce = [&](std::size_t offset, std::size_t length, const char* src) {
    const auto count = static_cast<std::int64_t>(length / es);
    torch::Tensor dst = flat.narrow(0, static_cast<std::int64_t>(offset / es), count);
    reduce_elementwise(dst, dst, torch::from_blob(const_cast<char*>(src), {count}, options), op);
  };
  ring_transfer(plan, ring, deadline, what);
}

}  // namespace

struct CpuCommunicator::Links {
  SocketFd to_next;
  SocketFd from_prev;
  RingLinks ring;
  std::unique_ptr<ShmAllreduce> shm;  // null: allreduce over the TCP ring only
};

CpuCommunicator::CpuCommunicator(std::shared_ptr<rendezvous::Store> store, int rank, int world_size,
                                 CpuCommunicatorOptions options)
    : store_(std::move(store)),
      rank_(rank),
      world_size_(world_size),
      options_(std::move(options)),
      failure_(std::make_unique<FailureLatch>(store_, options_.prefix() + "/failed", rank_)) {
  if (world_size_ < 1 || rank_ < 0 || rank_ >= world_size_)
    throw CommunicatorError("bad rank " + std::to_string(rank_) + " for world size " + std::to_string(world_size_));
  links_ = std::make_unique<Links>();
  if (world_size_ == 1) return;
  const auto deadline = rendezvous::deadline_after(options_.timeout());
  const int next = (rank_ + 1) % world_size_, prev = mod(rank_ - 1, world_size_);

  std::uint16_t port = 0;
  SocketFd listener = listen_ephemeral(options_.bind_host(), port);
  std::string host = options_.advertise_host().empty() ? guess_local_address() : options_.advertise_host();
  const std::string key_base = options_.prefix() + "/addr/";
  store_->set(key_base + std::to_string(rank_), rendezvous::format_endpoint(host, port));

  // The kernel completes our connect from its backlog before rank+1 calls accept, so connecting
  // first and accepting second cannot deadlock around the ring.
  const auto [next_host, next_port] =
      split_address(store_->get(key_base + std::to_string(next), options_.timeout()), next);
  links_->to_next = connect_until(next_host, next_port, deadline, who(next));
  const Hello hello{kMagic, rank_, world_size_};
  write_exact(links_->to_next.get(), &hello, sizeof hello, deadline, who(next));

  links_->from_prev = accept_until(listener.get(), deadline, who(prev));
  Hello theirs{};
  read_exact(links_->from_prev.get(), &theirs, sizeof theirs, deadline, who(prev));
  if (theirs.magic != kMagic || theirs.rank != prev || theirs.world_size != world_size_)
    throw CommunicatorError("rank " + std::to_string(rank_) + " expected rank " + std::to_string(prev) +
                            " of world size " + std::to_string(world_size_) + " to connect, got rank " +
                            std::to_string(theirs.rank) + " of world size " + std::to_string(theirs.world_size) +
                            "; is another job using the store prefix '" + options_.prefix() + "'?");
  links_->ring = {links_->to_next.get(), links_->from_prev.get(), next, prev};
  links_->shm = ShmAllreduce::connect(*store_, options_.prefix() + "/shm", links_->ring, rank_, world_size_,
                                      options_.shared_memory(), options_.shared_memory_min_bytes(), deadline);
}

bool CpuCommunicator::uses_shared_memory() const {
  return links_->shm != nullptr;
}

CpuCommunicator::~CpuCommunicator() {
  close();
}

void CpuCommunicator::close() {
  closed_ = true;
  // shutdown() (not close()) so that a collective running in another thread fails at once
  // instead of using a descriptor number the OS could reuse; the descriptors close with links_.
  if (links_ && links_->to_next.valid()) ::shutdown(links_->to_next.get(), SHUT_RDWR);
  if (links_ && links_->from_prev.valid()) ::shutdown(links_->from_prev.get(), SHUT_RDWR);
}

void CpuCommunicator::check_tensor(const torch::Tensor& t, const char* what) const {
  if (t.defined() && !t.device().is_cpu())
    throw CommunicatorError(std::string(what) + ": tensor is on " + t.device().str() + ", not on the CPU");
  check_collective_tensor(
      t, what, {torch::kFloat32, torch::kFloat64, torch::kBFloat16, torch::kFloat16, torch::kInt32, torch::kInt64});
}

std::string CpuCommunicator::begin(const char* what, int kind, const torch::Tensor& t, int arg) {
  failure_->check(what, closed_);
  const CollectiveHeader mine{kMagic, kind, static_cast<std::int32_t>(t.scalar_type()), arg, t.numel(), seq_++};
  if (world_size_ == 1) return what;
  const int prev = links_->ring.prev_rank;
  CollectiveHeader theirs{};
  try {
    ring_step(links_->ring, &mine, &theirs, sizeof mine, rendezvous::deadline_after(options_.timeout()), what);
  } catch (const Error& e) {
    fail(what, e);
  }
  if (theirs.magic != mine.magic || theirs.kind != mine.kind || theirs.dtype != mine.dtype || theirs.arg != mine.arg ||
      theirs.numel != mine.numel || theirs.seq != mine.seq)
    fail(what, CommunicatorError("rank " + std::to_string(rank_) + " called " + describe(mine) + " but rank " +
                                 std::to_string(prev) + " called " + describe(theirs) +
                                 "; every rank must call the same collectives in the same order with tensors of "
                                 "the same dtype and size"));
  return what;
}

void CpuCommunicator::fail(const std::string& what, const Error& e) {
  // Our own close() broke the links.
  if (closed_) failure_->fail_closed(what);
  failure_->fail(what, e, "", [this] { close(); });
}

void CpuCommunicator::allreduce(const torch::Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "allreduce");
  std::lock_guard lock(mutex_);
  const std::string what = begin("allreduce", 1, tensor, static_cast<int>(op));
  torch::Tensor flat = tensor.view({-1});
  const std::size_t bytes = tensor.numel() * tensor.element_size();
  if (world_size_ > 1 && bytes > 0) {
    const auto deadline = rendezvous::deadline_after(options_.timeout());
    try {
      if (links_->shm && links_->shm->handles(bytes))
        links_->shm->allreduce(flat, op, deadline, what);
      else
        ring_allreduce(flat, op, links_->ring, rank_, world_size_, deadline, what);
    } catch (const Error& e) {
      fail(what, e);
    }
  }
  if (op == ReduceOp::Average && world_size_ > 1) {
    if (tensor.is_floating_point())
      flat.div_(world_size_);
    else
      flat.div_(world_size_, "trunc");
  }
}

void CpuCommunicator::broadcast(const torch::Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast");
  if (root < 0 || root >= world_size_)
    throw CommunicatorError("broadcast: root " + std::to_string(root) + " is not a rank of world size " +
                            std::to_string(world_size_));
  std::lock_guard lock(mutex_);
  const std::string what = begin("broadcast", 2, tensor, root) + " from root " + std::to_string(root);
  const std::size_t bytes = tensor.numel() * tensor.element_size();
  if (world_size_ == 1 || bytes == 0) return;
  // A chain root -> root+1 -> ... -> root-1; each rank forwards chunks as they arrive.
  TransferPlan plan;
  plan.base = static_cast<char*>(tensor.data_ptr());
  plan.element_size = tensor.element_size();
  const ByteRange all{0, bytes, false};
  if (rank_ != root) plan.recvs.push_back(all);
  if ((rank_ + 1) % world_size_ != root) plan.sends.push_back(all);
  plan.send_allowance = rank_ == root ? bytes : 0;
  try {
    ring_transfer(plan, links_->ring, rendezvous::deadline_after(options_.timeout()), what);
  } catch (const Error& e) {
    fail(what, e);
  }
}

torch::Tensor CpuCommunicator::allgather(const torch::Tensor& input) {
  check_tensor(input, "allgather");
  std::vector<std::int64_t> shape{world_size_};
  for (std::int64_t d : input.sizes()) shape.push_back(d);
  torch::Tensor out = torch::empty(shape, input.options());
  out[rank_].copy_(input);
  std::lock_guard lock(mutex_);
  const std::string what = begin("allgather", 3, input, 0);
  const std::size_t row = input.numel() * input.element_size();
  if (world_size_ == 1 || row == 0) return out;
  // Step s sends row r-s (ours first) and receives row r-s-1, which step s+1 forwards.
  TransferPlan plan;
  plan.base = static_cast<char*>(out.data_ptr());
  plan.element_size = input.element_size();
  for (int s = 0; s < world_size_ - 1; ++s) {
    plan.sends.push_back({mod(rank_ - s, world_size_) * row, row, false});
    plan.recvs.push_back({mod(rank_ - s - 1, world_size_) * row, row, false});
  }
  plan.send_allowance = row;
  try {
    ring_transfer(plan, links_->ring, rendezvous::deadline_after(options_.timeout()), what);
  } catch (const Error& e) {
    fail(what, e);
  }
  return out;
}

void CpuCommunicator::barrier() {
  // An allreduce with one element per rank moves data at every step of both phases, so no rank
  // can leave before every rank has entered.
  allreduce(torch::zeros({world_size_}, torch::kInt32), ReduceOp::Sum);
}

}  // namespace ddp::runtime
