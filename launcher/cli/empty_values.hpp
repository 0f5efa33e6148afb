// Empty values on the command line: `--master_addr=` and `--master_addr ""`. CLI11 reads
// `--flag=` as the flag with no value and takes the next argument, often the program, as its
// value; the error then named the wrong thing ("no program given"). argparse (torchrun) reads it
// as an empty value, and so does ddplaunch: an empty value is refused by the flag's name, before
// CLI11 parses, unless the flag says what empty means (kEmptyValueMeans, cli_options.hpp); for
// those, `--flag=` becomes `--flag ""`, which CLI11 reads as an empty value.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ddp::launcher {

// argv (argv[0] included), its empty values checked: throws UsageError, "--master_addr is empty;
// give --master_addr=HOST or leave the flag out (see ddplaunch --help)", for the first flag of
// `app` that takes a value and is given an empty one, in either spelling, except those in
// kEmptyValueMeans; their `--flag=` is returned split into `--flag` and "". Only the launcher's
// flags are looked at: the program and its arguments (from the first argument that is not a flag
// or a flag's value, or after "--") are returned untouched. Pure.
std::vector<std::string> check_empty_values(const CLI::App& app, int argc, const char* const* argv);

}  // namespace ddp::launcher
