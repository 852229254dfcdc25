// A minimal .npy writer (format 1.0, little-endian, C order) for --dump: anyone can load a run's
// tensors with numpy.load and check them with their own code.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lab {
bool write_npy(const std::string& path, const std::vector<float>& data, const std::vector<int64_t>& shape);
bool write_npy(const std::string& path, const std::vector<int32_t>& data, const std::vector<int64_t>& shape);
}  // namespace lab
