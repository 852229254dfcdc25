#include "harness/dtype.h"

#include <cmath>

namespace lab {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType* out) {
  if (s == "fp32" || s == "f32" || s == "float") { *out = DType::f32; return true; }
  if (s == "fp16" || s == "f16" || s == "half") { *out = DType::f16; return true; }
  if (s == "bf16") { *out = DType::bf16; return true; }
  return false;
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t u = float_bits(f);
  if (std::isnan(f)) return uint16_t((u >> 16) | 0x40);  // keep it a (quiet) NaN
  u += 0x7FFFu + ((u >> 16) & 1u);                        // round to nearest even
  return uint16_t(u >> 16);
}

uint16_t float_to_half_bits(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return sign | (abs > 0x7F800000u ? 0x7E00u : 0x7C00u);  // NaN / inf
  if (abs >= 0x477FF000u) return sign | 0x7C00u;      // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {                            // below 2^-14: subnormal half (or zero)
    // value = abs_float; half subnormal unit is 2^-24. Round |f| / 2^-24 to nearest even.
    const float scaled = bits_float(abs) * 16777216.0f;  // exact: scaling by 2^24
    return sign | uint16_t(std::nearbyint(scaled));       // default FP mode: round-half-even
  }
  // Normal: rebias exponent 127 -> 15 and round the 23-bit mantissa to 10 bits, half to even.
  uint32_t h = ((abs >> 13) - ((127u - 15u) << 10));
  const uint32_t rest = abs & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: fine
  return sign | uint16_t(h);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0) {
    const float v = float(man) / 16777216.0f;  // subnormal: man * 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7F800000u | (man << 13));  // inf / NaN
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

float round_to(DType t, float f) {
  switch (t) {
    case DType::f32: return f;
    case DType::f16: return half_bits_to_float(float_to_half_bits(f));
    case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(f));
  }
  return f;
}

}  // namespace lab
