// See format_duration.hpp.
#include "common/format_duration.hpp"

#include <fmt/format.h>

namespace ddp {

std::string format_seconds(std::chrono::duration<double> d) {
  return fmt::format("{:g} s", d.count());
}

std::string format_seconds_fixed(std::chrono::duration<double> d, int decimals) {
  return fmt::format("{:.{}f} s", d.count(), decimals);
}

std::string format_whole_seconds(std::chrono::seconds d) {
  return fmt::format("{} s", d.count());
}

}  // namespace ddp
