// A POSIX shared-memory segment (shm_open + mmap) that the CPU communicator's same-host ranks map
// to exchange allreduce data without going through TCP. One rank creates it under a random name,
// the others open it by that name, and the creator unlinks the name as soon as every rank has
// mapped it, so nothing is left in /dev/shm once the communicator is set up, even if a process is
// killed afterwards. (A creator killed with SIGKILL during the set-up, between create() and
// unlink(), leaves the name behind: POSIX shared memory has no way to close that window.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp::runtime {

// Owns one mapping (and, for the creator until unlink(), the name). Move-only; not thread-safe.
class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates a segment of `bytes` named "/ddplaunch-<pid>-<random hex>", reserves its memory up
  // front (posix_fallocate: a full /dev/shm fails here instead of raising SIGBUS on first touch)
  // and maps it with its pages populated. The creator owns the name: the destructor unlinks it if
  // unlink() was not called. Does not block. Throws CommunicatorError carrying the errno text.
  static ShmSegment create(std::size_t bytes);

  // Maps the existing segment `name`, which must be exactly `bytes` long. Does not block. Throws
  // CommunicatorError (no such segment, wrong size, no permission, mapping failed).
  static ShmSegment open(const std::string& name, std::size_t bytes);

  // Removes the name from /dev/shm; the mapping stays valid in every process that has it.
  // Idempotent; a no-op for segments that were opened rather than created. Never throws.
  void unlink() noexcept;

  char* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool valid() const { return data_ != nullptr; }

 private:
  ShmSegment(std::string name, char* data, std::size_t size, bool owns_name)
      : name_(std::move(name)), data_(data), size_(size), owns_name_(owns_name) {}
  void reset() noexcept;

  std::string name_;
  char* data_ = nullptr;
  std::size_t size_ = 0;
  bool owns_name_ = false;  // created here and not yet unlinked
};

}  // namespace ddp::runtime
