// The console writer thread; see console_writer.hpp.
#include "launcher/console_writer.hpp"

#include <unistd.h>

#include <cerrno>

namespace ddp::launcher {

namespace {
void write_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // console closed (EPIPE) or broken: output is lost, the job goes on
    done += static_cast<std::size_t>(n);
  }
}
}  // namespace

ConsoleWriter::ConsoleWriter() : thread_([this] { run(); }) {}

ConsoleWriter::~ConsoleWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ConsoleWriter::write(int fd, std::string line) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queued_bytes_ + line.size() > kMaxQueuedBytes) {
      ++dropped_;
      return;
    }
    queued_bytes_ += line.size();
    queue_.emplace_back(fd, std::move(line));
  }
  wake_.notify_one();
}

void ConsoleWriter::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

void ConsoleWriter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) break;
    auto [fd, line] = std::move(queue_.front());
    queue_.pop_front();
    queued_bytes_ -= line.size();
    std::size_t dropped = dropped_;
    dropped_ = 0;
    writing_ = true;
    lock.unlock();
    if (dropped > 0) {
      write_all(2, "ddplaunch: the console is too slow; " + std::to_string(dropped) + " output line(s) dropped\n");
    }
    write_all(fd, line);
    lock.lock();
    writing_ = false;
    if (queue_.empty()) drained_.notify_all();
  }
}

}  // namespace ddp::launcher
