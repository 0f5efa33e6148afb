// Reading one member of a record's JSON object with its type checked: the launchers' records
// (root_cause.hpp, hung_collective.hpp) come from another node's launcher, possibly an older or a
// newer one, so a missing member keeps its default and a member of another type makes the record
// unreadable. Header-only; pure, thread-safe, never throws (but std::bad_alloc).
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddp::launcher {

// Reads member `name` of object `j` into `out` when present; true when absent (out unchanged),
// false when present with another type than T: a string, a bool, an integer, or an array of
// integers or of strings.
template <typename T>
bool take_member(const nlohmann::json& j, const char* name, T& out) {
  const auto it = j.find(name);
  if (it == j.end()) return true;
  const auto all = [&it](auto is) {
    if (!it->is_array()) return false;
    for (const nlohmann::json& v : *it) {
      if (!is(v)) return false;
    }
    return true;
  };
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return false;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return false;
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    if (!all([](const nlohmann::json& v) { return v.is_number_integer(); })) return false;
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (!all([](const nlohmann::json& v) { return v.is_string(); })) return false;
  } else {
    static_assert(std::is_integral_v<T>, "take_member: a string, a bool, an integer or a vector of them");
    if (!it->is_number_integer()) return false;
  }
  out = it->get<T>();
  return true;
}

}  // namespace ddp::launcher
