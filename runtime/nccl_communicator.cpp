// The NCCL communicator (see nccl_communicator.hpp): the unique id exchange through the store, a
// non-blocking NCCL communicator whose "in progress" states we wait out with a deadline, the
// collectives on the communicator's own stream (event waits both ways, recordStream on the
// buffers), and failure propagation through the store.
#include "ddplaunch/nccl_communicator.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "common/exit_codes.hpp"
#include "runtime/arrival_records.hpp"
#include "runtime/collective_watchdog.hpp"
#include "runtime/failure_latch.hpp"
#include "runtime/nccl_id.hpp"
#include "runtime/gpu_rank.hpp"
#include "runtime/stream_overlap.hpp"
#include "runtime/tensor_checks.hpp"

namespace ddp::runtime {
namespace {

using ddp::Error;
using Clock = std::chrono::steady_clock;

std::string ms(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

// NCCL's name for `result` plus its last error message, which usually says what went wrong.
std::string nccl_message(ncclResult_t result, ncclComm_t comm) {
  std::string message = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') message += " (" + std::string(last) + ")";
  return message;
}

// Throws the error type matching an NCCL failure.
[[noreturn]] void throw_nccl(const std::string& what, ncclResult_t result, ncclComm_t comm) {
  const std::string message = what + ": " + nccl_message(result, comm);
  if (result == ncclRemoteError)
    throw PeerError(-1,
                    message + "; a peer failed or exited (NCCL does not say which rank), see the logs of the others");
  if (result == ncclTimeout) throw rendezvous::TimeoutError(message);
  throw CommunicatorError(message + "; set NCCL_DEBUG=WARN for NCCL's own log");
}

void check_cuda(cudaError_t result, const std::string& what) {
  if (result != cudaSuccess) throw CommunicatorError(what + ": CUDA error: " + cudaGetErrorString(result));
}

// How long a wait may last and what it says when it ends badly.
struct Wait {
  Clock::time_point deadline;
  const std::atomic<bool>* closed = nullptr;     // set: close() from another thread ends the wait
  std::function<std::string()> timeout_message;  // built when the deadline passes
  std::function<void()> on_long_wait;            // called once, half-way to the deadline (may be empty)
};

// Calls done() until it returns true. Sleep-and-poll because neither NCCL (a non-blocking
// communicator leaving ncclInProgress) nor the CUDA runtime (an event completing, with a
// deadline) offers a host-side event to wait on. Throws TimeoutError with the wait's message at
// its deadline, and CommunicatorError once `*closed` is set (close() from another thread).
void poll_until(const std::function<bool()>& done, const Wait& w) {
  auto pause = std::chrono::microseconds(20);
  const auto half = Clock::now() + (w.deadline - Clock::now()) / 2;
  bool long_wait = false;
  for (;;) {
    if (done()) return;
    if (w.closed != nullptr && *w.closed) throw CommunicatorError("the communicator was closed while waiting");
    const auto now = Clock::now();
    if (now >= w.deadline) throw rendezvous::TimeoutError(w.timeout_message());
    if (!long_wait && now >= half && w.on_long_wait) {
      long_wait = true;
      w.on_long_wait();
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(5));
  }
}

// One poll of a non-blocking communicator: false while in progress, true once done; throws on
// an asynchronous error (a peer gone, a network failure).
bool comm_ready(ncclComm_t comm, const std::string& what) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t query = ncclCommGetAsyncError(comm, &state);
  if (query != ncclSuccess) throw_nccl(what, query, comm);
  if (state == ncclInProgress) return false;
  if (state != ncclSuccess) throw_nccl(what, state, comm);
  return true;
}

// Completes an NCCL call on a non-blocking communicator: any call may return ncclInProgress
// (a collective then is not enqueued yet, e.g. while NCCL connects lazily to its peers), and the
// next NCCL call must wait until the communicator leaves that state.
void complete(ncclResult_t result, ncclComm_t comm, const std::string& what, const Wait& w) {
  if (result == ncclSuccess) return;
  if (result != ncclInProgress) throw_nccl(what, result, comm);
  poll_until([&] { return comm_ready(comm, what); }, w);
}

ncclDataType_t nccl_type(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32:
      return ncclFloat32;
    case torch::kFloat64:
      return ncclFloat64;
    case torch::kBFloat16:
      return ncclBfloat16;
    case torch::kFloat16:
      return ncclFloat16;
    case torch::kInt32:
      return ncclInt32;
    case torch::kInt64:
      return ncclInt64;
    case torch::kUInt8:
      return ncclUint8;
    case torch::kInt8:
      return ncclInt8;
    default:
      DDP_ASSERT(false, "nccl_type: dtype passed check_tensor but has no NCCL type");
      return ncclNumTypes;
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Average:
      return ncclAvg;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Max:
      return ncclMax;
  }
  DDP_ASSERT(false, "nccl_op: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
  return ncclSum;
}

// A CUDA event without timing, destroyed with its owner.
struct Event {
  cudaEvent_t event = nullptr;
  ~Event() {
    // Nothing useful to do if destroying the event fails at this point.
    if (event != nullptr) (void)cudaEventDestroy(event);
  }
};

// Whether the work before the event's record has run; throws CommunicatorError on a CUDA error.
bool event_done(const Event& e, const std::string& what) {
  const cudaError_t state = cudaEventQuery(e.event);
  if (state == cudaSuccess) return true;
  if (state != cudaErrorNotReady) check_cuda(state, what);
  return false;
}

}  // namespace

struct NcclCommunicator::Nccl {
  // Every NCCL call on `comm` holds comm_mutex: the watchdog aborts it from its own thread, and
  // no call may use the communicator once ncclCommAbort has freed it.
  std::mutex comm_mutex;
  ncclComm_t comm = nullptr;
  bool aborted = false;  // under comm_mutex
  // The communicator's own stream (not the legacy default stream every thread shares, nor the
  // caller's compute stream), and the event for the caller's side of the ordering (reused: a
  // wait takes the event's state when it is called).
  c10::cuda::CUDAStream stream;
  Event ready;            // on the caller's stream: the inputs are written
  StreamOverlap overlap;  // DDP's buckets, on `stream` (overlapped())
  explicit Nccl(c10::DeviceIndex device)
      : stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device)), overlap(stream) {
    check_cuda(cudaEventCreateWithFlags(&ready.event, cudaEventDisableTiming), "creating a CUDA event");
  }

  // Enqueues call(comm, our stream) after the work the caller's current stream has queued, makes
  // that stream wait for it, and keeps `buffers` from reuse while our stream needs them; with
  // `wait_on_host`, also blocks until the collective has run. Returns the collective's own
  // completion event (on our stream), which the watchdog polls. Throws as complete() and
  // poll_until() (TimeoutError at the wait's deadline, CommunicatorError once closed or aborted,
  // NCCL errors).
  std::shared_ptr<Event> enqueue(const std::vector<torch::Tensor>& buffers,
                                 const std::function<ncclResult_t(ncclComm_t, cudaStream_t)>& call,
                                 const std::string& what, const Wait& w, bool wait_on_host);
  // Runs f(comm) holding comm_mutex; throws CommunicatorError once the watchdog has aborted it.
  template <class F>
  auto guarded(const std::string& what, F&& f) {
    std::lock_guard lock(comm_mutex);
    if (aborted) throw CommunicatorError(what + ": the communicator was aborted after a failure");
    return f(comm);
  }
  // One poll of the communicator's state under comm_mutex: comm_ready(), true once it has left
  // "in progress".
  bool settled(const std::string& what) {
    return guarded(what, [&](ncclComm_t c) { return comm_ready(c, what); });
  }
  // NCCL's asynchronous error, "" while healthy or in progress (the watchdog's poll). Never
  // throws NCCL's errors: it returns them.
  std::string async_error() {
    std::lock_guard lock(comm_mutex);
    if (aborted) return "";
    ncclResult_t state = ncclSuccess;
    const ncclResult_t query = ncclCommGetAsyncError(comm, &state);
    if (query != ncclSuccess) return nccl_message(query, comm);
    if (state == ncclSuccess || state == ncclInProgress) return "";
    return nccl_message(state, comm);
  }
  // ncclCommAbort once (from the watchdog or close()). Never throws.
  void abort() noexcept {
    std::lock_guard lock(comm_mutex);
    if (aborted) return;
    aborted = true;
    (void)ncclCommAbort(comm);
  }
};

std::shared_ptr<Event> NcclCommunicator::Nccl::enqueue(
    const std::vector<torch::Tensor>& buffers, const std::function<ncclResult_t(ncclComm_t, cudaStream_t)>& call,
    const std::string& what, const Wait& w, bool wait_on_host) {
  const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(stream.device_index());
  const cudaStream_t ours = stream.stream();
  // Ours waits for what the caller's stream has queued (the inputs being written) ...
  check_cuda(cudaEventRecord(ready.event, current.stream()), what);
  check_cuda(cudaStreamWaitEvent(ours, ready.event, 0), what);
  const ncclResult_t result = guarded(what, [&](ncclComm_t c) { return call(c, ours); });
  if (result != ncclSuccess) {
    if (result != ncclInProgress) guarded(what, [&](ncclComm_t c) -> bool { throw_nccl(what, result, c); });
    poll_until([&] { return settled(what); }, w);
  }
  // ... and the caller's stream waits for the collective before its next kernel reads the result.
  // The event is the collective's own (the watchdog polls it while later ones are enqueued).
  auto done = std::make_shared<Event>();
  check_cuda(cudaEventCreateWithFlags(&done->event, cudaEventDisableTiming), "creating a CUDA event");
  check_cuda(cudaEventRecord(done->event, ours), what);
  check_cuda(cudaStreamWaitEvent(current.stream(), done->event, 0), what);
  // The caching allocator must not hand these buffers out again while our stream still uses
  // them (freed on the caller's stream, they would be reused there at once).
  for (const torch::Tensor& t : buffers) c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
  if (!wait_on_host) return done;
  // Each poll also asks NCCL for asynchronous errors, so a dead peer fails the wait at once
  // rather than at the deadline.
  poll_until(
      [&] {
        if (event_done(*done, what)) return true;
        settled(what);
        return false;
      },
      w);
  return done;
}

// One collective as the public calls describe it to run().
struct NcclCommunicator::Collective {
  std::string what;
  std::vector<torch::Tensor> buffers;
  std::function<ncclResult_t(ncclComm_t, cudaStream_t)> call;
  bool wait_on_host = false;
};

void NcclCommunicator::run(const Collective& c) {
  const std::uint64_t n = ++sequence_;
  try {
    // Enqueueing may wait (NCCL "in progress"): half-way this rank records its arrival, at the
    // deadline the message names the ranks that recorded none (arrival_records.hpp).
    const Wait w{rendezvous::deadline_after(options_.timeout()), &closed_,
                 [&] { return collective_timeout(c.what, n); }, [&] { arrivals_->waiting_long(n); }};
    std::shared_ptr<Event> done = nccl_->enqueue(c.buffers, c.call, c.what, w, c.wait_on_host);
    // From here the host no longer waits for it: the watchdog does, with the same deadline.
    if (!c.wait_on_host) watchdog_->enqueued(n, c.what, [done, what = c.what] { return event_done(*done, what); });
  } catch (const Error& e) {
    fail(c.what, e);
  }
}

std::string NcclCommunicator::collective_timeout(const std::string& what, std::uint64_t n) const {
  return timeout_message(what) + " (collective #" + std::to_string(n) + ")" + arrivals_->missing_phrase(n);
}

// What a failure found off the caller's thread does unless NcclCommunicatorOptions::on_failure
// says otherwise: the process ends, as PyTorch's ProcessGroupNCCL tears it down
// (TORCH_NCCL_ASYNC_ERROR_HANDLING): the host may already have read results of a collective that
// never completed, and the main thread may be blocked in a CUDA call that nothing else ends.
[[noreturn]] static void tear_down(const std::string& message) {
  std::fprintf(stderr,
               "ddplaunch runtime: %s; ending this process (exit code %d): results read after the failed collective "
               "cannot be trusted (NcclCommunicatorOptions::on_failure handles it instead)\n",
               message.c_str(), static_cast<int>(kExitFailure));
  std::fflush(stderr);
  std::_Exit(kExitFailure);
}

void NcclCommunicator::start_watchdog() {
  CollectiveWatchdogOptions o;
  o.rank = rank_;
  o.timeout = options_.timeout();
  o.store = store_;
  o.listener_store = options_.listener_store();
  o.failed_key = options_.prefix() + "/failed";
  CollectiveWatchdogHooks h;
  Nccl* nccl = nccl_.get();
  h.async_error = [nccl] { return nccl->async_error(); };
  h.abort = [nccl] { nccl->abort(); };
  h.on_failure = options_.on_failure() ? options_.on_failure() : tear_down;
  h.long_wait = [arrivals = arrivals_.get()](std::uint64_t n) { arrivals->waiting_long(n); };
  h.timeout_message = [this](std::uint64_t n, const std::string& what) { return collective_timeout(what, n); };
  watchdog_ = std::make_unique<CollectiveWatchdog>(std::move(o), std::move(h));
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<rendezvous::Store> store, int rank, int world_size,
                                   NcclCommunicatorOptions options)
    : store_(std::move(store)),
      rank_(rank),
      world_size_(world_size),
      options_(std::move(options)),
      failure_(std::make_unique<FailureLatch>(store_, options_.prefix() + "/failed", rank_)) {
  device_ = gpu_rank_device(rank_, world_size_, options_.device(), "NcclCommunicatorOptions");
  const auto deadline = rendezvous::deadline_after(options_.timeout());
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));

  // 1. Rank 0 creates the id and publishes its bytes; the others wait for them (nccl_id.hpp).
  ncclUniqueId id;
  long long generation = 0;
  const std::string bytes = exchange_nccl_id(
      *store_, NcclIdExchange{options_.prefix(), rank_, options_.timeout(), sizeof id.internal},
      [&] {
        const ncclResult_t result = ncclGetUniqueId(&id);
        if (result != ncclSuccess) throw_nccl("rank 0: ncclGetUniqueId", result, nullptr);
        return std::string(id.internal, sizeof id.internal);
      },
      &generation);
  arrivals_ = std::make_unique<ArrivalRecords>(store_, options_.prefix() + "/" + std::to_string(generation), rank_,
                                               world_size_);
  std::memcpy(id.internal, bytes.data(), sizeof id.internal);

  // 2. Every rank joins a non-blocking communicator, so that the join can time out.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const std::string what = "rank " + std::to_string(rank_) + ": joining the NCCL communicator '" + options_.prefix() +
                           "' of world size " + std::to_string(world_size_) + " on CUDA device " +
                           std::to_string(device_);
  const ncclResult_t result = ncclCommInitRankConfig(&comm, world_size_, id, rank_, &config);
  try {
    const std::string timeout = "rank " + std::to_string(rank_) + " timed out after " + ms(options_.timeout()) +
                                " joining the NCCL communicator '" + options_.prefix() + "' of world size " +
                                std::to_string(world_size_) + "; check that every rank started and uses this prefix";
    complete(result, comm, what, Wait{deadline, nullptr, [&] { return timeout; }, {}});
  } catch (const Error&) {
    // Abort's own result does not matter: the communicator is being thrown away either way.
    if (comm != nullptr) (void)ncclCommAbort(comm);
    throw;
  }
  try {
    nccl_ = std::make_unique<Nccl>(static_cast<c10::DeviceIndex>(device_));
  } catch (const std::exception&) {  // CUDA's (ours) or LibTorch's (the stream pool)
    (void)ncclCommAbort(comm);
    throw;
  }
  nccl_->comm = comm;
  start_watchdog();
}

NcclCommunicator::~NcclCommunicator() {
  close();
}

void NcclCommunicator::close() {
  // Set before taking the mutex: a collective waiting in poll_until() sees it, fails and
  // releases the mutex, so close() cannot be held up by a stuck peer for a whole timeout.
  closed_ = true;
  std::lock_guard lock(mutex_);
  release_locked();
}

void NcclCommunicator::release_locked() noexcept {
  if (!nccl_) return;
  // The watchdog's hooks use the communicator: it stops first (joining a failure it is handling).
  if (watchdog_) watchdog_->stop();
  bool aborted = false;
  {
    std::lock_guard lock(nccl_->comm_mutex);
    aborted = nccl_->aborted;
  }
  const ncclComm_t comm = nccl_->comm;
  // Nothing of ours left on the GPU? A collective still queued or running there (a peer that
  // never joined it, or the caller closing without synchronising) would hold ncclCommFinalize
  // for the whole timeout: it is aborted at once instead, its result lost.
  const bool idle = cudaStreamQuery(nccl_->stream.stream()) == cudaSuccess;
  nccl_.reset();
  if (aborted) return;  // the watchdog's ncclCommAbort has freed it
  // Setting the device can fail (a sticky CUDA error, the runtime torn down at exit): NCCL's own
  // calls then run on whatever device is current, which is all that is left to try. Never a
  // throw here: close() runs in destructors and after failures, and would hide the real error.
  std::optional<c10::cuda::CUDAGuard> guard;
  try {
    guard.emplace(static_cast<c10::DeviceIndex>(device_));
  } catch (const std::exception&) {
    guard.reset();
  }
  if (!failure_->broken() && idle) {
    // A healthy, idle communicator: finalize flushes NCCL's own state, with the usual bound;
    // destroy then frees without blocking. If the flush fails or times out we abort instead of
    // hanging in a destructor.
    bool flushed = false;
    try {
      complete(ncclCommFinalize(comm), comm, "close",
               Wait{rendezvous::deadline_after(options_.timeout()),
                    nullptr,
                    [] { return std::string("close: timed out flushing the NCCL communicator"); },
                    {}});
      flushed = true;
    } catch (const std::exception&) {
      // Falls through to abort: close() does not throw, and a failed flush leaves nothing to save.
    }
    if (flushed) {
      // The communicator is quiescent; a failing destroy would only leak its memory.
      (void)ncclCommDestroy(comm);
      return;
    }
  }
  // After a failure, or with a collective in flight, the GPU may be stuck in a collective that
  // only abort ends; its result is ignored because there is nothing left to do with a
  // communicator that cannot be aborted.
  (void)ncclCommAbort(comm);
}

void NcclCommunicator::check_tensor(const torch::Tensor& t, const char* what) const {
  check_gpu_collective_tensor(t, what, device_);
}

std::string NcclCommunicator::begin(const char* what) {
  failure_->check(what, closed_);
  // A failure the watchdog found (with an on_failure that let the process go on).
  if (const std::string found = watchdog_ ? watchdog_->failure() : ""; !found.empty())
    throw CommunicatorError(std::string(what) + " on a failed communicator: " + found);
  return what;
}

std::string NcclCommunicator::timeout_message(const std::string& what) const {
  return what + " on rank " + std::to_string(rank_) + " timed out after " + ms(options_.timeout()) +
         " (NCCL communicator '" + options_.prefix() +
         "'); a rank has not called the same collective, or its GPU is "
         "stuck";
}

void NcclCommunicator::fail(const std::string& what, const Error& e) {
  // Our own close() interrupted the wait.
  if (closed_) failure_->fail_closed(what);
  // The watchdog may have found the failure first (and told the peers): it is the cause. From
  // here this thread reports, and the listener must not take our own record for a peer's.
  std::string first = watchdog_ ? watchdog_->failure() : "";
  if (watchdog_) watchdog_->stop();
  failure_->fail(what, e, std::move(first), [this] { release_locked(); });
}

void NcclCommunicator::allreduce(const torch::Tensor& tensor, ReduceOp op) {
  check_tensor(tensor, "allreduce");
  std::lock_guard lock(mutex_);
  const std::string what = begin("allreduce");
  if (tensor.numel() == 0) return;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  run(Collective{what,
                 {tensor},
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   return ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                                        nccl_type(tensor.scalar_type()), nccl_op(op), comm, stream);
                 },
                 false});
}

void NcclCommunicator::broadcast(const torch::Tensor& tensor, int root) {
  check_tensor(tensor, "broadcast");
  if (root < 0 || root >= world_size_)
    throw CommunicatorError("broadcast: root " + std::to_string(root) + " is not a rank of world size " +
                            std::to_string(world_size_));
  std::lock_guard lock(mutex_);
  const std::string what = begin("broadcast") + " from root " + std::to_string(root);
  if (tensor.numel() == 0) return;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  run(Collective{what,
                 {tensor},
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   return ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                                        nccl_type(tensor.scalar_type()), root, comm, stream);
                 },
                 false});
}

torch::Tensor NcclCommunicator::allgather(const torch::Tensor& input) {
  check_tensor(input, "allgather");
  std::vector<std::int64_t> shape{world_size_};
  for (std::int64_t d : input.sizes()) shape.push_back(d);
  std::lock_guard lock(mutex_);
  const std::string what = begin("allgather");
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  // Allocated on the caller's stream, which waits for the collective before it reads it.
  torch::Tensor out = torch::empty(shape, input.options());
  if (input.numel() == 0) return out;
  run(Collective{what,
                 {input, out},
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   return ncclAllGather(input.data_ptr(), out.data_ptr(), input.numel(), nccl_type(input.scalar_type()),
                                        comm, stream);
                 },
                 false});
  return out;
}

void NcclCommunicator::barrier() {
  std::lock_guard lock(mutex_);
  const std::string what = begin("barrier");
  const auto device = static_cast<c10::DeviceIndex>(device_);
  c10::cuda::CUDAGuard guard(device);
  // A one-element allreduce cannot complete on any rank before every rank has enqueued it.
  const torch::Tensor token =
      torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt32).device(torch::kCUDA, device));
  run(Collective{what,
                 {token},
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   return ncclAllReduce(token.data_ptr(), token.data_ptr(), 1, ncclInt32, ncclSum, comm, stream);
                 },
                 true});
}

void NcclCommunicator::overlapped(const std::function<void()>& body) {
  StreamOverlap* overlap = nullptr;
  {
    std::lock_guard lock(mutex_);
    begin("overlapped work");
    overlap = &nccl_->overlap;
  }
  // Without mutex_: body's collectives take it.
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  overlap->run(body);
}

void NcclCommunicator::join_overlapped() {
  std::lock_guard lock(mutex_);
  begin("joining overlapped work");
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  nccl_->overlap.join();
}

}  // namespace ddp::runtime
