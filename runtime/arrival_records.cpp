// See arrival_records.hpp.
#include "runtime/arrival_records.hpp"

#include <fmt/format.h>

#include "common/rank_ranges.hpp"

namespace ddp::runtime {
namespace {

std::string ranks_word(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", rank_ranges(ranks));
}

}  // namespace

ArrivalRecords::ArrivalRecords(std::shared_ptr<rendezvous::Store> store, std::string prefix, int rank, int world_size)
    : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank), world_size_(world_size) {}

std::string ArrivalRecords::key(std::uint64_t n, int rank) const {
  return fmt::format("{}/arrived/{}/{}", prefix_, n, rank);
}

void ArrivalRecords::waiting_long(std::uint64_t n) noexcept {
  try {
    store_->set(key(n, rank_), "1");
  } catch (const std::exception&) {
    // The store may be gone with the job: the timeout's message just names no one.
  }
}

std::vector<int> ArrivalRecords::missing(std::uint64_t n) const noexcept {
  std::vector<int> out;
  try {
    for (int r = 0; r < world_size_; ++r) {
      if (r != rank_ && !store_->check({key(n, r)})) out.push_back(r);
    }
  } catch (const std::exception&) {
    return {};
  }
  return out;
}

std::string ArrivalRecords::missing_phrase(std::uint64_t n) const noexcept {
  try {
    const std::vector<int> absent = missing(n);
    if (absent.empty()) return "";
    std::vector<int> present;
    for (int r = 0, a = 0; r < world_size_; ++r) {
      if (a < static_cast<int>(absent.size()) && absent[static_cast<std::size_t>(a)] == r) {
        ++a;
      } else {
        present.push_back(r);
      }
    }
    return fmt::format("; {} never arrived at collective #{} ({} waited in it)", ranks_word(absent), n,
                       ranks_word(present));
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace ddp::runtime
