#include "harness/npy.h"

#include <fstream>

namespace lab {
namespace {
bool write(const std::string& path, const char* descr, const void* data, size_t bytes,
           const std::vector<int64_t>& shape) {
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) header += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  header += "), }";
  // magic(6) + version(2) + header length(2) + header, padded with spaces to a multiple of 64,
  // ending in '\n'.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) return false;
  const uint16_t len = uint16_t(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.put(char(len & 0xFF));
  f.put(char(len >> 8));
  f.write(header.data(), std::streamsize(header.size()));
  f.write(static_cast<const char*>(data), std::streamsize(bytes));
  return bool(f);
}
}  // namespace

bool write_npy(const std::string& path, const std::vector<float>& data, const std::vector<int64_t>& shape) {
  return write(path, "<f4", data.data(), data.size() * 4, shape);
}
bool write_npy(const std::string& path, const std::vector<int32_t>& data, const std::vector<int64_t>& shape) {
  return write(path, "<i4", data.data(), data.size() * 4, shape);
}
}  // namespace lab
