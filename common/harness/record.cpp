#include "harness/record.h"

#include <fstream>
#include <vector>

namespace lab {
namespace {
using json = nlohmann::json;

enum class Kind { string, number, integer, boolean, object, nullable_int, nullable_number };

bool has_kind(const json& v, Kind k) {
  switch (k) {
    case Kind::string: return v.is_string();
    case Kind::number: return v.is_number();
    case Kind::integer: return v.is_number_integer();
    case Kind::boolean: return v.is_boolean();
    case Kind::object: return v.is_object();
    case Kind::nullable_int: return v.is_null() || v.is_number_integer();
    case Kind::nullable_number: return v.is_null() || v.is_number();
  }
  return false;
}
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::string: return "string";
    case Kind::number: return "number";
    case Kind::integer: return "integer";
    case Kind::boolean: return "boolean";
    case Kind::object: return "object";
    case Kind::nullable_int: return "integer or null";
    case Kind::nullable_number: return "number or null";
  }
  return "?";
}

struct Field {
  const char* path;  // dotted
  Kind kind;
};

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = {
      {"schema_version", Kind::integer}, {"section", Kind::string}, {"variant", Kind::string},
      {"build", Kind::string}, {"git_sha", Kind::string}, {"time_utc", Kind::string},
      {"gpu", Kind::object}, {"gpu.name", Kind::string},
      {"problem", Kind::object}, {"problem.b", Kind::integer}, {"problem.h", Kind::integer},
      {"problem.h_kv", Kind::integer}, {"problem.t_q", Kind::integer}, {"problem.t_kv", Kind::integer},
      {"problem.d", Kind::integer}, {"problem.dtype", Kind::string}, {"problem.causal", Kind::boolean},
      {"problem.window", Kind::nullable_int}, {"problem.page_size", Kind::nullable_int},
      {"check", Kind::object}, {"check.passed", Kind::boolean},
      {"check.max_abs_err", Kind::nullable_number}, {"check.rel_l2_err", Kind::nullable_number},
      {"check.ref_err_bound", Kind::nullable_number}, {"check.rule", Kind::string},
      {"check.rows_checked", Kind::integer},
      {"timing", Kind::object}, {"timing.warmup", Kind::integer}, {"timing.iters", Kind::integer},
      {"timing.median_ms", Kind::nullable_number}, {"timing.min_ms", Kind::nullable_number},
      {"timing.max_ms", Kind::nullable_number},
      {"metrics", Kind::object}, {"metrics.tflops", Kind::nullable_number},
      {"metrics.hbm_gbps", Kind::nullable_number}, {"metrics.hbm_bytes_model", Kind::nullable_int},
      {"metrics.extra_device_bytes", Kind::nullable_int},
      {"command", Kind::string},
  };
  return fields;
}
}  // namespace

std::string validate_record(const json& r) {
  if (!r.is_object()) return "record: expected a JSON object";
  for (const Field& f : schema()) {
    const json* node = &r;
    std::string path = f.path;
    size_t start = 0;
    while (true) {
      const size_t dot = path.find('.', start);
      const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!node->is_object() || !node->contains(key)) return "field '" + path + "': missing";
      node = &(*node)[key];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    if (!has_kind(*node, f.kind)) return "field '" + path + "': expected " + kind_name(f.kind);
  }
  if (r["schema_version"].get<int>() != kSchemaVersion)
    return "field 'schema_version': expected " + std::to_string(kSchemaVersion);
  const std::string build = r["build"].get<std::string>();
  if (build != "solution" && build != "lab" && build != "cpu-model" && build != "baseline")
    return "field 'build': expected solution, lab, cpu-model or baseline, got '" + build + "'";
  return "";
}

bool append_record(const std::string& path, const json& record, std::string* error) {
  json all = json::array();
  {
    std::ifstream in(path);
    if (in) {
      json existing = json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (existing.is_array()) all = std::move(existing);
    }
  }
  all.push_back(record);
  std::ofstream out(path);
  if (!out) {
    *error = "cannot write " + path;
    return false;
  }
  out << all.dump(1) << "\n";
  return bool(out);
}

}  // namespace lab
