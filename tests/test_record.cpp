// The result record's schema: a valid record passes, and every malformed one is rejected with a
// message naming the field. Records survive a write/read round trip through append_record.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <cstdio>
#include <fstream>

#include "harness/device.h"
#include "harness/record.h"

using json = nlohmann::json;

namespace {
json sample() {
  return json::parse(R"({"schema_version": 1, "section": "04_fp16", "variant": "mma", "build": "solution",
    "git_sha": "abc1234", "time_utc": "2026-12-01T10:00:00Z",
    "gpu": {"name": "NVIDIA H200", "cc": "9.0", "sms": 132, "driver": "580.159.04"},
    "problem": {"b": 4, "h": 16, "h_kv": 16, "t_q": 4096, "t_kv": 4096, "d": 128,
                "dtype": "bf16", "causal": false, "window": null, "page_size": null},
    "check": {"passed": true, "max_abs_err": 0.0012, "rel_l2_err": 0.0031, "ref_err_bound": 0.0064,
              "rule": "2x same-precision unfused + atol 1e-5", "rows_checked": 512},
    "timing": {"warmup": 10, "iters": 50, "median_ms": 1.71, "min_ms": 1.69, "max_ms": 1.80},
    "metrics": {"tflops": 321.4, "hbm_gbps": 78.5, "hbm_bytes_model": 134217728, "extra_device_bytes": 0},
    "command": "build/bin/04_fp16 --variant mma"})");
}
}  // namespace

TEST_CASE("record: results/README.md's example is valid", "[record]") { CHECK(lab::validate_record(sample()) == ""); }

TEST_CASE("record: malformed records name the field", "[record]") {
  json r = sample();
  r.erase("variant");
  CHECK(lab::validate_record(r) == "field 'variant': missing");
  r = sample();
  r["check"]["passed"] = "yes";
  CHECK(lab::validate_record(r) == "field 'check.passed': expected boolean");
  r = sample();
  r["problem"]["t_q"] = 4096.5;
  CHECK(lab::validate_record(r) == "field 'problem.t_q': expected integer");
  r = sample();
  r["timing"].erase("median_ms");
  CHECK(lab::validate_record(r) == "field 'timing.median_ms': missing");
  r = sample();
  r["build"] = "student";
  CHECK(lab::validate_record(r).find("field 'build'") == 0);
  r = sample();
  r["schema_version"] = 2;
  CHECK(lab::validate_record(r) == "field 'schema_version': expected 1");
  CHECK(lab::validate_record(json::array()) == "record: expected a JSON object");
}

TEST_CASE("record: append_record round trip", "[record]") {
  const std::string path = "record_roundtrip_test.json";
  std::remove(path.c_str());
  std::string err;
  json a = sample(), b = sample();
  b["variant"] = "scalar";
  REQUIRE(lab::append_record(path, a, &err));
  REQUIRE(lab::append_record(path, b, &err));
  std::ifstream in(path);
  const json all = json::parse(in);
  REQUIRE(all.is_array());
  REQUIRE(all.size() == 2);
  CHECK(all[0] == a);
  CHECK(all[1]["variant"] == "scalar");
  for (const auto& r : all) CHECK(lab::validate_record(r) == "");
  std::remove(path.c_str());
}

TEST_CASE("record: a file holding anything but a list of records is refused and left as it is", "[record]") {
  const std::string path = "record_not_a_list.json";
  for (const char* content : {"{\"a\": 1}\n", "hello\n", "[1, 2", "[1, 2]\n", "[{\"a\": 1}]\n"}) {
    { std::ofstream(path) << content; }
    std::string err;
    CHECK(!lab::append_record(path, sample(), &err));
    CHECK(err.find("holds something other than a JSON list") != std::string::npos);
    std::ifstream in(path);
    const std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(kept == content);
  }
  { std::ofstream(path) << "  \n"; }  // an empty file is an empty list
  std::string err;
  CHECK(lab::append_record(path, sample(), &err));
  std::remove(path.c_str());
}

TEST_CASE("record: written through a temporary file renamed over the list", "[record]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("lab_record_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "r.json").string();
  std::string err;
  REQUIRE(lab::append_record(path, sample(), &err));
  REQUIRE(lab::append_record(path, sample(), &err));
  int files = 0;
  for (const auto& f : fs::directory_iterator(dir)) files += f.is_regular_file();
  CHECK(files == 1);  // no temporary file left beside it
  CHECK(!lab::append_record((dir / "missing" / "r.json").string(), sample(), &err));
  CHECK(err.find("does not exist") != std::string::npos);
  CHECK(!lab::append_record(dir.string(), sample(), &err));
  CHECK(err.find("is a folder") != std::string::npos);
  fs::remove_all(dir);
}

// The record's gpu.driver comes from the first line of /proc/driver/nvidia/version, whose
// wording differs between the proprietary and the open kernel module (a parser that takes the word
// after "Module" reads "for" from the open module's line).
TEST_CASE("record: the driver version is found in either kernel module's line", "[record]") {
  CHECK(lab::driver_version_in("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  2 2025") ==
        "580.159.04");
  CHECK(lab::driver_version_in("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
                               "(dvs-builder@U22-I3-AE18-23-3)  Tue Sep 23 09:55:41 UTC 2025") == "580.95.05");
  CHECK(lab::driver_version_in("NVRM version: something else 12 x.y") == "");
  CHECK(lab::driver_version_in("") == "");
}
