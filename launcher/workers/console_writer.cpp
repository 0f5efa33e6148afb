// The console writer thread; see console_writer.hpp.
#include "launcher/workers/console_writer.hpp"

#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <utility>
#include <vector>

namespace ddp::launcher {

namespace {

// Writes every byte of `iov` to `fd`, resuming after partial writes. Output is lost (and the job
// goes on) when the console is closed (EPIPE) or broken.
void write_all(int fd, std::vector<iovec>& iov) {
  std::size_t first = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<std::size_t>(iov.size() - first, IOV_MAX));
    const ssize_t n = ::writev(fd, iov.data() + first, count);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    auto left = static_cast<std::size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
}

// Whether poll(2) says `fd` takes a write now.
bool writable_now(int fd) {
  pollfd p{fd, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

}  // namespace

ConsoleWriter::~ConsoleWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ConsoleWriter::write(int fd, std::string lines) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty() && !writing_ && lines.size() <= kDirectBytes && writable_now(fd)) {
      // Nothing is queued or being written, so these lines overtake none; the lock keeps the
      // thread (if any) from writing meanwhile.
      std::vector<iovec> iov{iovec{lines.data(), lines.size()}};
      write_all(fd, iov);
      return;
    }
    if (queued_bytes_ + lines.size() > kMaxQueuedBytes) {
      dropped_lines_ += static_cast<std::size_t>(std::count(lines.begin(), lines.end(), '\n'));
      return;
    }
    queued_bytes_ += lines.size();
    queue_.emplace_back(fd, std::move(lines));
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
}

std::string ConsoleWriter::recycled_buffer() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) return {};
  std::string buffer = std::move(free_.back());
  free_.pop_back();
  free_bytes_ -= buffer.capacity();
  return buffer;
}

void ConsoleWriter::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

void ConsoleWriter::run() {
  std::deque<std::pair<int, std::string>> batch;
  std::vector<iovec> iov;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) break;
    // Take everything queued: while we write it, the event loop queues the next batch.
    batch.swap(queue_);
    const std::size_t dropped = std::exchange(dropped_lines_, 0);
    writing_ = true;
    lock.unlock();
    if (dropped > 0) {
      std::string notice =
          "ddplaunch: the console is too slow; " + std::to_string(dropped) + " output line(s) dropped\n";
      iov.assign(1, iovec{notice.data(), notice.size()});
      write_all(2, iov);
    }
    // Consecutive blocks for the same descriptor go out in one writev; order is kept.
    for (std::size_t i = 0; i < batch.size();) {
      const int fd = batch[i].first;
      iov.clear();
      for (; i < batch.size() && batch[i].first == fd; ++i)
        iov.push_back({batch[i].second.data(), batch[i].second.size()});
      write_all(fd, iov);
    }
    std::size_t written = 0;
    for (const auto& block : batch) written += block.second.size();
    lock.lock();
    queued_bytes_ -= written;  // counted until written, so the bound covers the batch in flight
    for (auto& block : batch) {
      if (free_bytes_ + block.second.capacity() > kMaxRecycledBytes) break;
      free_bytes_ += block.second.capacity();
      free_.push_back(std::move(block.second));
    }
    batch.clear();
    writing_ = false;
    if (queue_.empty()) drained_.notify_all();
  }
}

}  // namespace ddp::launcher
