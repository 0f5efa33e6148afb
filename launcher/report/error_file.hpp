// A worker's error file (TORCHELASTIC_ERROR_FILE), as torch.distributed.elastic's @record writes
// it when the worker's main raises:
//   {"message": {"message": "ValueError: boom",
//                "extraInfo": {"py_callstack": "Traceback (most recent call last): ...",
//                              "timestamp": "1700000000"}}}
// "message" may also be a plain string (torchrun accepts that form too). Parsed with
// nlohmann-json; nothing here trusts the file's shape.
#pragma once

#include <optional>
#include <string>

namespace ddp::launcher {

struct ErrorRecord {
  std::string message;                 // "ValueError: boom"; "" when the file gave none
  std::string traceback;               // the formatted Python traceback; "" when none
  std::optional<long long> timestamp;  // seconds since the epoch, when the worker recorded it
  std::string problem;                 // why the file could not be used ("" when it could)
};

// Reads `path`. nullopt when there is no file (the worker wrote none: it did not use @record, or
// it was killed). A file that is not the JSON above gives a record with `problem` set (and the
// first bytes of the file, escaped, in it); so does a FIFO, a device or a directory there (not
// read: config/file_flag.hpp). Blocks only on the file system; never throws.
std::optional<ErrorRecord> read_error_file(const std::string& path);

}  // namespace ddp::launcher
