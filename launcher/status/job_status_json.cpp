// See job_status_json.hpp.
#include "launcher/status/job_status_json.hpp"

#include <nlohmann/json.hpp>

namespace ddp::launcher {
namespace {

using json = nlohmann::ordered_json;

// A document as JSON; null when it is not an object (a store value of another release, say).
json object_or_null(const std::string& text) {
  json doc = json::parse(text, nullptr, false);
  return doc.is_object() ? doc : json(nullptr);
}

std::string dump(const json& doc) {
  return doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string job_status_json(const std::string& own, const std::map<int, std::string>& others, int nnodes) {
  json doc = object_or_null(own);
  json list = json::array();
  for (int g = 1; g < nnodes; ++g) {
    const auto it = others.find(g);
    list.push_back({{"group_rank", g}, {"status", it == others.end() ? json(nullptr) : object_or_null(it->second)}});
  }
  doc["other_nodes"] = std::move(list);
  return dump(doc);
}

std::string with_job_page(const std::string& own, const std::string& url) {
  json doc = object_or_null(own);
  doc["job_page"] = url.empty() ? json(nullptr) : json(url);
  return dump(doc);
}

}  // namespace ddp::launcher
