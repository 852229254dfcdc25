// fp8 (e4m3) on the host: the exact conversion the GPU's cvt.rn.satfinite.e4m3x2.f32 does, and the
// quantisation of section 08's `fp8` variant (one scale per (sequence, K/V head) and tensor,
// amax / 448), so the CPU model and the check's reference quantise exactly as the device does.
//
// e4m3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN, so the
// largest finite value is 1.75 * 2^8 = 448; normals down to 2^-6, subnormals m * 2^-9.
#pragma once
#include <cstdint>
#include <vector>

#include "harness/problem.h"

namespace lab {

constexpr float kE4m3Max = 448.0f;

// Round to nearest even, saturating to +-448 (the ".satfinite" of the hardware conversion); NaN
// stays NaN (0x7F with the sign).
uint8_t float_to_e4m3_bits(float f);
float e4m3_bits_to_float(uint8_t b);
inline float round_to_e4m3(float f) { return e4m3_bits_to_float(float_to_e4m3_bits(f)); }

// The scale of a group of values whose largest magnitude is amax: x / scale maps amax to 448.
// All zeros: 1 (any scale quantises them exactly). Written once; the device uses the same line
// (common/hopper/ws_fp8.cuh), in IEEE fp32, so host and device scales are the same bits.
inline float e4m3_scale_of(float amax) { return amax > 0.f ? amax / kE4m3Max : 1.f; }

// Q, K, V quantised per (sequence b, K/V head hk): Q's group is the H / H_kv query heads that
// share hk (all their rows), K's and V's the rows of hk. q8/k8/v8 hold the e4m3 values as floats
// in the inputs' layouts ([B, T, H(_kv), D]), unscaled (what the tensor cores multiply); scales
// are [B, H_kv]: x ~ x8 * scale.
struct Fp8Inputs {
  std::vector<float> q8, k8, v8;
  std::vector<float> q_scale, k_scale, v_scale;
};
Fp8Inputs quantise_e4m3(const Problem& p, const HostInputs& in);

// The dequantised inputs, x8 * scale in fp32: what "the same inputs at fp8" are for the reference.
HostInputs dequantise(const Problem& p, const Fp8Inputs& f);

}  // namespace lab
