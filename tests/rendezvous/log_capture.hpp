// Server log lines captured thread-safely for the loopback tests (the server calls its log sink
// on the loop thread); waits for a line instead of sleeping.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::testing {

// Server log lines, captured thread-safely (the server calls the sink on its loop thread).
// Declare it before the server, so that it outlives the server.
class LogCapture {
 public:
  std::function<void(std::string_view)> sink() {
    return [this](std::string_view line) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        lines_.emplace_back(line);
      }
      changed_.notify_all();
    };
  }

  // Waits until a line containing every one of `needles` was logged.
  bool wait_for_line(const std::vector<std::string>& needles, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] {
      return std::any_of(lines_.begin(), lines_.end(), [&](const std::string& line) {
        return std::all_of(needles.begin(), needles.end(),
                           [&](const std::string& n) { return line.find(n) != std::string::npos; });
      });
    });
  }

  // Lines that contain every one of `needles`, now.
  std::size_t count_lines(const std::vector<std::string>& needles) {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<std::size_t>(std::count_if(lines_.begin(), lines_.end(), [&](const std::string& line) {
      return std::all_of(needles.begin(), needles.end(),
                         [&](const std::string& n) { return line.find(n) != std::string::npos; });
    }));
  }

  std::string all() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    for (const auto& l : lines_) out += l + "\n";
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> lines_;
};

}  // namespace ddp::testing
