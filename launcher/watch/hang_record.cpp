// See hang_record.hpp.
#include "launcher/watch/hang_record.hpp"

#include <map>

namespace ddp::launcher {

std::optional<HungCollective> hung_collective(const FrFinding& f) {
  static const std::map<FrFindingKind, const char*> kNames{
      {FrFindingKind::Hang, "hang"}, {FrFindingKind::Desync, "desync"}, {FrFindingKind::Stuck, "stuck"}};
  const auto name = kNames.find(f.kind);
  if (name == kNames.end()) return std::nullopt;
  HungCollective c{name->second, f.group_name, f.group_desc, f.group_ranks,   f.seq,  f.p2p,
                   f.op,         {},           f.waiting,    f.never_entered, f.lines};
  for (const FrCall& call : f.calls) c.calls.push_back({call.op, call.input, call.ranks, call.line});
  return c;
}

}  // namespace ddp::launcher
