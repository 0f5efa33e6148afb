// See in_process_stream.hpp.
#include "rendezvous/in_process_stream.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"

namespace ddp::rendezvous {

void InProcessPeer::receive(std::string_view bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    replies.append(bytes);
  }
  arrived.notify_all();
}

void InProcessPeer::break_off(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (broken.empty()) broken = why.empty() ? "closed" : why;
  }
  arrived.notify_all();
}

InProcessStream::InProcessStream(std::shared_ptr<InProcessHub> hub, std::shared_ptr<InProcessPeer> peer,
                                 std::string peer_name, std::string local_address)
    : hub_(std::move(hub)),
      peer_(std::move(peer)),
      peer_name_(std::move(peer_name)),
      local_address_(std::move(local_address)) {}

InProcessStream::~InProcessStream() {
  close();
}

void InProcessStream::write_all(const std::string& bytes, TimePoint) {
  {
    std::lock_guard<std::mutex> lock(peer_->mutex);
    if (!peer_->broken.empty()) {
      throw ConnectionError("connection to the store at " + peer_name_ + " is closed (" + peer_->broken + ")");
    }
  }
  std::lock_guard<std::mutex> lock(hub_->mutex);
  if (!hub_->server) throw ConnectionError("the store at " + peer_name_ + " has stopped");
  if (hub_->running) return hub_->server->post_in_process(peer_, bytes);
  hub_->server->serve_in_process(peer_, bytes);
}

std::string InProcessStream::read_exact(std::size_t n, TimePoint deadline) {
  std::unique_lock<std::mutex> lock(peer_->mutex);
  bool loop_checked = false;
  for (;;) {
    std::string& replies = peer_->replies;
    if (replies.size() - peer_->read_from >= n) {
      std::string out = replies.substr(peer_->read_from, n);
      peer_->read_from += n;
      if (peer_->read_from == replies.size()) {
        replies.clear();
        peer_->read_from = 0;
      } else if (peer_->read_from >= replies.size() / 2) {
        replies.erase(0, peer_->read_from);
        peer_->read_from = 0;
      }
      return out;
    }
    if (!peer_->broken.empty()) {
      throw ConnectionError("connection to the store at " + peer_name_ + " lost: " + peer_->broken);
    }
    if (!loop_checked) {
      // The reply is not there: only the loop's other connections can bring it. (The hub's
      // mutex is taken without the peer's: the loop takes them the other way round.)
      loop_checked = true;
      lock.unlock();
      start_loop();
      lock.lock();
      continue;
    }
    if (peer_->arrived.wait_until(lock, deadline) == std::cv_status::timeout &&
        peer_->replies.size() - peer_->read_from < n && peer_->broken.empty()) {
      throw TimeoutError("timed out waiting for a reply from " + peer_name_);
    }
  }
}

void InProcessStream::start_loop() {
  std::lock_guard<std::mutex> lock(hub_->mutex);
  if (hub_->server && !hub_->running) hub_->server->start_locked();
}

void InProcessStream::close() {
  if (std::exchange(closed_, true)) return;
  peer_->break_off("closed by this process");
  std::lock_guard<std::mutex> lock(hub_->mutex);
  if (!hub_->server) return;
  if (hub_->running) return hub_->server->post_detach(peer_);
  hub_->server->detach_in_process(*peer_);
}

void InProcessStream::interrupt() {
  peer_->break_off("interrupted");
}

std::string local_address_towards(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(unbracket_host(host).c_str(), service.c_str(), &hints, &found) != 0 || !found) return "";
  std::string out;
  for (addrinfo* a = found; a && out.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage self{};
    socklen_t len = sizeof(self);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* where = self.ss_family == AF_INET6
                              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&self)->sin6_addr)
                              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&self)->sin_addr);
      if (::inet_ntop(self.ss_family, where, text, sizeof(text))) out = text;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return out;
}

}  // namespace ddp::rendezvous
