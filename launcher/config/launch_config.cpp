// StreamSelection; the rules on a whole LaunchConfig are in validate.cpp.
#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

int StreamSelection::for_rank(int local_rank) const {
  const auto it = per_rank.find(local_rank);
  return it == per_rank.end() ? all : it->second;
}

}  // namespace ddp::launcher
