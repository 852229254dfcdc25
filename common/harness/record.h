// The result record (schema_version 1, results/README.md): one JSON object per run, written by every
// section with --json and read by the bench/tables scripts. validate_record() is the schema: it
// names the first field that is missing or of the wrong type.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "harness/device.h"

namespace lab {

constexpr int kSchemaVersion = 1;

// "" when `r` is a valid record, else "field 'check.passed': expected boolean" and the like.
std::string validate_record(const nlohmann::json& r);

// "" when `path` can take a record: a missing file in an existing writable folder, or a file that
// holds a JSON list (of records). Else the one-line reason: a folder, an unwritable place, a
// kernel file system (/proc, /sys, /dev), a file holding anything else (it is never overwritten).
std::string record_path_problem(const std::string& path);

// "" when `path` names a place this process can write: an existing writable file (want_dir: a
// folder), or a missing one in an existing writable folder. Else the one-line reason.
std::string writable_path_problem(const std::string& path, bool want_dir);

// Appends `record` to the list in `path` (a missing file becomes a one-record list), atomically:
// the new list is written to a temporary file beside it and renamed over it, so an interrupted
// run never leaves half a list. Refuses (false, with the reason, file untouched) whatever
// record_path_problem refuses.
bool append_record(const std::string& path, const nlohmann::json& record, std::string* error);

// The fields every section's record shares: the command line as typed, the time in UTC, the GPU
// (or "cpu" for a CPU-model run) and the timing block (medians null when the run was not timed).
std::string command_line(int argc, char** argv);
std::string utc_now();
nlohmann::json gpu_json(const DeviceInfo& dev, bool cpu);
nlohmann::json timing_json(const Timing& timing, bool timed);

}  // namespace lab
