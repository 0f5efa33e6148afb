// POSIX shared memory for the CPU communicator (see shm_segment.hpp).
#include "runtime/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

#include "ddplaunch/communicator.hpp"
#include "runtime/socket_fd.hpp"

namespace ddp::runtime {
namespace {

std::string random_name() {
  std::random_device rd;
  const std::uint64_t bits = (std::uint64_t{rd()} << 32) ^ rd();
  char buf[64];
  std::snprintf(buf, sizeof buf, "/ddplaunch-%d-%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(bits));
  return buf;
}

[[noreturn]] void fail(const std::string& what, const std::string& name, int err) {
  throw CommunicatorError(what + " shared memory segment '" + name + "' failed: " + std::strerror(err));
}

// Maps `bytes` of `fd` shared, pages populated so the first allreduce does not pay the faults.
char* map(int fd, std::size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) fail("mapping", name, errno);
  return static_cast<char*>(p);
}

}  // namespace

ShmSegment ShmSegment::create(std::size_t bytes) {
  std::string name;
  SocketFd fd;  // owns any descriptor, here the segment's until it is mapped
  // A clash of 64 random bits is all but impossible; O_EXCL makes it harmless, and one retry
  // makes it invisible.
  for (int attempt = 0; attempt < 2 && !fd.valid(); ++attempt) {
    name = random_name();
    fd = SocketFd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
    if (!fd.valid() && errno != EEXIST) fail("creating", name, errno);
  }
  if (!fd.valid()) fail("creating", name, EEXIST);
  // From here the name exists: remove it again on every failure.
  ShmSegment segment(name, nullptr, 0, true);
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) fail("sizing", name, errno);
  if (const int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); err != 0)
    fail("reserving " + std::to_string(bytes) + " bytes for", name, err);
  segment.data_ = map(fd.get(), bytes, name);
  segment.size_ = bytes;
  return segment;
}

ShmSegment ShmSegment::open(const std::string& name, std::size_t bytes) {
  SocketFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd.valid()) fail("opening", name, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail("inspecting", name, errno);
  if (static_cast<std::size_t>(st.st_size) != bytes)
    throw CommunicatorError("shared memory segment '" + name + "' has " + std::to_string(st.st_size) +
                            " bytes, expected " + std::to_string(bytes));
  return ShmSegment(name, map(fd.get(), bytes, name), bytes, false);
}

ShmSegment::~ShmSegment() {
  reset();
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owns_name_(std::exchange(other.owns_name_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    reset();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owns_name_ = std::exchange(other.owns_name_, false);
  }
  return *this;
}

void ShmSegment::unlink() noexcept {
  // ENOENT (already gone) is the state we want; nothing else can fail for a name we created.
  if (owns_name_) ::shm_unlink(name_.c_str());
  owns_name_ = false;
}

void ShmSegment::reset() noexcept {
  unlink();
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace ddp::runtime
