// The result record (schema_version 1, DESIGN.md): one JSON object per run, written by every
// section with --json and read by the bench/tables scripts. validate_record() is the schema: it
// names the first field that is missing or of the wrong type.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace lab {

constexpr int kSchemaVersion = 1;

// "" when `r` is a valid record, else "field 'check.passed': expected boolean" and the like.
std::string validate_record(const nlohmann::json& r);

// Writes `record` to `path`: a file holding a JSON array of records gets it appended, any other
// (or missing) file is replaced by a one-element array. Returns false with a reason on I/O error.
bool append_record(const std::string& path, const nlohmann::json& record, std::string* error);

}  // namespace lab
