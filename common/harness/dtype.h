// Element types of the sections' inputs and outputs, and exact host-side conversions (round to
// nearest even), so the host can hold every tensor as float values that are exactly the values
// the GPU stores.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace lab {

enum class DType { f32, f16, bf16 };

const char* dtype_name(DType t);                       // "fp32", "fp16", "bf16"
bool parse_dtype(const std::string& s, DType* out);    // accepts the names above
inline int dtype_bytes(DType t) { return t == DType::f32 ? 4 : 2; }

inline uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
inline float bf16_bits_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

// The value `f` becomes when stored as `t` (identity for fp32).
float round_to(DType t, float f);

// Poison: every output is filled with all-one bits before a kernel runs. All-ones is a NaN in
// fp32, fp16 and bf16 that arithmetic never produces (GPUs return the canonical NaN 0x7fff...),
// so an element still holding it was never written.
constexpr uint32_t kPoisonBits32 = 0xFFFFFFFFu;
constexpr uint16_t kPoisonBits16 = 0xFFFFu;
inline float poison_float() { return bits_float(kPoisonBits32); }
inline bool is_poison(float f) { return float_bits(f) == kPoisonBits32; }

}  // namespace lab
