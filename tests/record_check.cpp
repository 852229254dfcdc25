// record_check FILE [--expect N]: validates every record in a results file against the schema.
// Exit 0 when all are valid (and there are N of them, if given), 1 otherwise, naming the field.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "harness/record.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: record_check FILE [--expect N]\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "record_check: cannot read %s\n", argv[1]);
    return 1;
  }
  const auto all = nlohmann::json::parse(in, nullptr, false);
  if (!all.is_array()) {
    std::fprintf(stderr, "record_check: %s is not a JSON array of records\n", argv[1]);
    return 1;
  }
  int bad = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (std::string why = lab::validate_record(all[i]); !why.empty()) {
      std::fprintf(stderr, "record %zu: %s\n", i, why.c_str());
      ++bad;
    }
  if (argc == 4 && std::strcmp(argv[2], "--expect") == 0 && all.size() != size_t(std::atoi(argv[3]))) {
    std::fprintf(stderr, "record_check: %zu records, expected %s\n", all.size(), argv[3]);
    return 1;
  }
  std::printf("record_check: %zu records, %d invalid\n", all.size(), bad);
  return bad ? 1 : 0;
}
