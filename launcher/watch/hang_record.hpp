// A Flight Recorder finding (watch/fr/analysis.hpp) as the record a hang's root cause carries
// (rdzv/hung_collective.hpp). The runtime's progress hangs are made into one in
// collective_hang.hpp. Pure; never throws (but std::bad_alloc).
#pragma once

#include <optional>

#include "launcher/rdzv/hung_collective.hpp"
#include "launcher/watch/fr/analysis.hpp"

namespace ddp::launcher {

// nullopt for FrFindingKind::None.
std::optional<HungCollective> hung_collective(const FrFinding& finding);

}  // namespace ddp::launcher
