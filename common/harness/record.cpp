#include "harness/record.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
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

namespace {
// A file whose bytes are only whitespace holds no records yet (e.g. made by `touch`).
bool blank(const std::string& text) { return text.find_first_not_of(" \t\r\n") == std::string::npos; }

bool read_file(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *text = s.str();
  return !in.bad();
}
}  // namespace

std::string writable_path_problem(const std::string& path, bool want_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) return "an empty path";
  const fs::path abs = fs::weakly_canonical(fs::absolute(fs::path(path), ec), ec);
  const std::string a = abs.string();
  for (const char* pseudo : {"/proc", "/sys", "/dev"})
    if (a == pseudo || a.rfind(std::string(pseudo) + "/", 0) == 0)
      return path + " is in " + pseudo + ", a kernel file system, not a place for files";
  const fs::file_status st = fs::status(abs, ec);
  if (fs::exists(st)) {
    if (want_dir && !fs::is_directory(st)) return path + " is a file, not a folder";
    if (!want_dir && fs::is_directory(st)) return path + " is a folder, not a file";
    if (!want_dir && !fs::is_regular_file(st)) return path + " is not a regular file";
    if (::access(abs.c_str(), W_OK) != 0) return path + " is not writable";
    return "";
  }
  const fs::path parent = abs.parent_path();
  const fs::file_status ps = fs::status(parent, ec);
  if (!fs::exists(ps)) return "folder " + parent.string() + " does not exist";
  if (!fs::is_directory(ps)) return parent.string() + " is a file, not a folder";
  if (::access(parent.c_str(), W_OK | X_OK) != 0) return "folder " + parent.string() + " is not writable";
  return "";
}

std::string record_path_problem(const std::string& path) {
  if (std::string m = writable_path_problem(path, false); !m.empty()) return m;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return "";
  std::string text;
  if (!read_file(path, &text)) return path + " is not readable";
  if (blank(text)) return "";
  const json existing = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const bool records = existing.is_array() && std::all_of(existing.begin(), existing.end(), [](const json& r) {
    return r.is_object() && r.contains("schema_version") && r.contains("section");
  });
  if (!records)
    return path + " holds something other than a JSON list of records; it is left as it is (give another file)";
  return "";
}

bool append_record(const std::string& path, const json& record, std::string* error) {
  if (std::string m = record_path_problem(path); !m.empty()) {
    *error = m;
    return false;
  }
  json all = json::array();
  std::string text;
  if (read_file(path, &text) && !blank(text)) all = json::parse(text, nullptr, false);
  all.push_back(record);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << all.dump(1) << "\n";
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      *error = "cannot write " + tmp;
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    *error = "cannot replace " + path + " (rename failed)";
    return false;
  }
  return true;
}

std::string command_line(int argc, char** argv) {
  std::string c;
  for (int i = 0; i < argc; ++i) c += (i ? " " : "") + std::string(argv[i]);
  return c;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

nlohmann::json gpu_json(const DeviceInfo& dev, bool cpu) {
  if (cpu) return {{"name", "cpu"}};
  return {{"name", dev.name}, {"cc", std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor)},
          {"sms", dev.sms}, {"driver", dev.driver}, {"slug", dev.slug()},
          {"clocks", {{"sm_max_mhz", dev.sm_clock_mhz}, {"mem_max_mhz", dev.mem_clock_mhz}}}};
}

nlohmann::json timing_json(const Timing& timing, bool timed) {
  using nlohmann::json;
  return {{"method", timing.method}, {"warmup", timing.warmup}, {"iters", timing.iters},
          {"median_ms", timed ? json(timing.median_ms) : json(nullptr)},
          {"min_ms", timed ? json(timing.min_ms) : json(nullptr)},
          {"max_ms", timed ? json(timing.max_ms) : json(nullptr)}};
}

}  // namespace lab
