// argparse's abbreviations, as torchrun's parser allows them: a long flag may be shortened to any
// prefix that names exactly one option (`--nnode 1`, `--nproc 2`, `--master_p 29500`). An option's
// two spellings (`--nproc_per_node`, `--nproc-per-node`) are one option, so `--nproc` is not
// ambiguous. (Python 3.11's argparse refuses it as ambiguous between the two spellings of the one
// option; ddplaunch takes what the user plainly meant.) An exact name always wins.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ddp::launcher {

// argv (argv[0] included) with every abbreviated launcher flag written out in full, `=VALUE`
// kept. Only the launcher's flags are looked at, as check_empty_values() walks them: the program
// and its arguments (from the first argument that is not a flag or a flag's value, or after
// "--") are returned untouched. A prefix of no flag is left as it is (CLI11 then names it).
// Throws UsageError, "--rdzv is ambiguous: --rdzv_backend, --rdzv_conf, ...; write the flag out",
// for a prefix of several options. Pure; not thread-safe only as `app` is not.
std::vector<std::string> expand_flag_prefixes(const CLI::App& app, std::vector<std::string> args);

}  // namespace ddp::launcher
