// CLI11's App for a command line of many flags: each new flag's names are checked against the
// flags already declared in a hash set, instead of by CLI11 2.1's own check, which compares the
// new flag with every earlier one through a helper that copies both name lists each time
// (detail::find_member takes its vector by value). For ddplaunch's ~90 flags, most with two
// spellings, that check cost about 0.15 ms of every launch (bench/RESULTS.md, launch overhead).
// Only add_option, add_flag and add_flag_callback go around it; the rest is CLI11's own. With
// declare_only(), they declare only the flags a command line mentions (mentioned_flags.hpp) and
// hand back a placeholder for the others. Not thread-safe.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace ddp::launcher {

class FlagApp : public CLI::App {
 public:
  using CLI::App::App;

  // As CLI::App's; throws CLI::OptionAlreadyAdded for a name declared before, as CLI11 does. A
  // flag declare_only() leaves out is not declared: the placeholder comes back instead, so that
  // a declaration's chained calls (->check(...)->type_name(...)) still go somewhere.
  template <typename... Args>
  CLI::Option* add_option(const std::string& names, Args&&... args) {
    if (wanted_ && !wanted_(names)) return placeholder();
    return without_cli11_check([&] { return CLI::App::add_option(names, std::forward<Args>(args)...); });
  }
  template <typename... Args>
  CLI::Option* add_flag(const std::string& names, Args&&... args) {
    if (wanted_ && !wanted_(names)) return placeholder();
    return without_cli11_check([&] { return CLI::App::add_flag(names, std::forward<Args>(args)...); });
  }

  template <typename... Args>
  CLI::Option* add_flag_callback(const std::string& names, Args&&... args) {
    if (wanted_ && !wanted_(names)) return placeholder();
    return without_cli11_check([&] { return CLI::App::add_flag_callback(names, std::forward<Args>(args)...); });
  }

  // From now on, add_option, add_flag and add_flag_callback declare a flag only when `wanted` accepts its names text
  // (CLI11's "--nproc_per_node,--nproc-per-node"). Its help and completion then list only those:
  // a command line that asks for them declares everything (MentionedFlags::all()).
  void declare_only(std::function<bool(const std::string& names)> wanted) { wanted_ = std::move(wanted); }

  // Whether every flag is declared, so that the help and completion can list them: texts only
  // they show (the footer, long descriptions) need not be built otherwise.
  bool lists_all() const { return !wanted_; }

  // False for the placeholder that stands for a flag left undeclared.
  static bool declared(const CLI::Option* option) { return option->get_name() != kPlaceholder; }

  // How many times the command line gave the flag `name` ("--master_addr"); 0 for one not declared.
  std::size_t given(const std::string& name) const {
    const CLI::Option* option = get_option_no_throw(name);
    return option == nullptr ? 0 : option->count();
  }

 private:
  static constexpr const char* kPlaceholder = "--ddplaunch-undeclared-flag";

  // One option outside the app's list: never parsed, listed or counted.
  CLI::Option* placeholder() {
    if (!placeholder_) {
      CLI::App::add_flag(kPlaceholder);
      placeholder_ = std::move(options_.back());
      options_.pop_back();
    }
    return placeholder_.get();
  }

  // Adds one flag with the earlier ones set aside (CLI11 then finds nothing to compare with),
  // checks its names here and puts the earlier ones back, in order, with it after them.
  template <typename Add>
  CLI::Option* without_cli11_check(Add add) {
    if (names_.empty()) {
      for (const CLI::Option_p& o : options_) names_.merge(names_of(*o));  // --help, --version
    }
    std::vector<CLI::Option_p> earlier = std::exchange(options_, {});
    CLI::Option* added = nullptr;
    std::unordered_set<std::string> names;
    try {
      added = add();
      names = names_of(*added);
      for (const std::string& n : names) {
        if (names_.count(n)) throw CLI::OptionAlreadyAdded(n);
      }
    } catch (...) {
      options_ = std::move(earlier);  // a refused flag is dropped
      throw;
    }
    earlier.push_back(std::move(options_.back()));
    options_ = std::move(earlier);
    names_.merge(names);
    return added;
  }
  static std::unordered_set<std::string> names_of(const CLI::Option& o) {
    std::unordered_set<std::string> names;
    for (const std::string& n : o.get_lnames()) names.insert("--" + n);
    for (const std::string& n : o.get_snames()) names.insert("-" + n);
    return names;
  }

  std::unordered_set<std::string> names_;
  std::function<bool(const std::string&)> wanted_;
  CLI::Option_p placeholder_;
};

}  // namespace ddp::launcher
