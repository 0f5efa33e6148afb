// See mentioned_flags.hpp.
#include "launcher/cli/mentioned_flags.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

namespace ddp::launcher {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// A long argument that could be (an abbreviation of) one of these flags, which list every flag.
bool asks_for_a_listing(const std::string& name) {
  for (const char* listing : {"--help", "--print_completion", "--print-completion"}) {
    if (starts_with(listing, name)) return true;
  }
  return false;
}

}  // namespace

MentionedFlags::MentionedFlags(const std::vector<std::string>& args, EnvLookup env) : env_(std::move(env)) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-' || arg == "--") continue;
    if (arg[1] == '-') {
      std::string name = arg.substr(0, arg.find('='));
      all_ = all_ || asks_for_a_listing(name);
      long_args_.push_back(std::move(name));
    } else {
      short_letters_ += arg.substr(1);
      all_ = all_ || arg.find('h') != std::string::npos;  // -h, or a cluster holding it
    }
  }
}

bool MentionedFlags::operator()(const std::string& names) const {
  if (all_) return true;
  bool first_long = true;
  std::size_t begin = 0;
  while (begin < names.size()) {
    std::size_t end = names.find(',', begin);
    if (end == std::string::npos) end = names.size();
    // "--local_rank_arg{underscore}": the braces hold the flag's default, not its name.
    const std::string name = names.substr(begin, std::min(end, names.find('{', begin)) - begin);
    begin = end + 1;
    if (starts_with(name, "--")) {
      for (const std::string& arg : long_args_) {
        if (starts_with(name, arg)) return true;
      }
      if (first_long && env_) {
        first_long = false;
        std::string pet = "PET_";
        for (const char c : name.substr(2))
          pet.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
        if (env_(pet)) return true;
      }
    } else if (name.size() == 2 && name[0] == '-' && short_letters_.find(name[1]) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace ddp::launcher
