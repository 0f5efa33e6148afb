// A small CLI::App with a few of the launcher's flags, in both spellings where the launcher has
// two, for the tests of the walks over argv that run before CLI11 parses (flag_prefixes.hpp,
// empty_values.hpp).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace ddp::testing {

struct FewFlags {
  CLI::App app{"t"};
  std::string text;  // every option's value; the walks never parse
  bool on = false;
  FewFlags() {
    app.add_option("--nproc_per_node,--nproc-per-node", text);
    app.add_option("--nnodes", text);
    app.add_option("--master_addr,--master-addr", text)->type_name("HOST");
    app.add_option("--rdzv_backend,--rdzv-backend", text);
    app.add_option("--rdzv_conf,--rdzv-conf", text);  // where empty means something (kEmptyValueMeans)
    app.add_option("--rdzv", text);                   // an exact name, and a prefix of the two above
    app.add_flag("--standalone", on);
  }
};

}  // namespace ddp::testing
