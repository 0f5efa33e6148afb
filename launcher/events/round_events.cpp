// See round_events.hpp.
#include "launcher/events/round_events.hpp"

namespace ddp::launcher {

std::vector<std::string> RoundView::hosts() const {
  std::vector<std::string> out;
  for (const NodeInfo& n : ranks.nodes()) out.push_back(n.host);
  return out;
}

}  // namespace ddp::launcher
