// See entry_reader.hpp.
#include "launcher/watch/entry_reader.hpp"

#include <future>
#include <sstream>

#include <fmt/format.h>

#include "launcher/watch/probe/worker_server.hpp"

namespace ddp::launcher {

std::vector<EntryTime> parse_fr_entries(const std::string& text, int rank) {
  std::vector<EntryTime> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    EntryTime e;
    e.rank = rank;
    if (!(fields >> e.group >> e.seq >> e.entered_ns >> e.signature) || e.entered_ns <= 0) continue;
    out.push_back(std::move(e));
  }
  return out;
}

void EntryReader::reset(std::vector<EntrySource> workers) {
  workers_ = std::move(workers);
  table_seen_.clear();
}

std::vector<EntryTime> EntryReader::read() {
  std::vector<EntryTime> out;
  std::vector<std::pair<int, std::future<WorkerServerReply>>> asked;
  for (const EntrySource& w : workers_) {
    if (table_ && w.slot < table_->slots() && table_->read(w.slot).pid == w.pid) {
      std::uint64_t& seen = table_seen_[w.slot];
      for (const CollectiveEntry& c : table_->entries(w.slot, seen)) {
        out.push_back({w.rank, "runtime", static_cast<long long>(c.seq), c.entered_ns,
                       fmt::format("{}:{}", to_string(c.kind), c.bytes)});
        seen = c.seq;
      }
    } else if (!w.socket.empty()) {
      asked.emplace_back(w.rank, std::async(std::launch::async, [socket = w.socket, t = timeout_] {
                           return ask_worker_server(socket, "ddplaunch_fr_entries", t);
                         }));
    }
  }
  for (auto& [rank, reply] : asked) {
    const WorkerServerReply r = reply.get();
    // A worker without the handler (an older torch, no worker server yet) or busy: nothing now.
    if (!r.ok) continue;
    std::vector<EntryTime> entries = parse_fr_entries(r.body, rank);
    out.insert(out.end(), std::make_move_iterator(entries.begin()), std::make_move_iterator(entries.end()));
  }
  return out;
}

}  // namespace ddp::launcher
