#include "harness/fp8.h"

#include <algorithm>
#include <cmath>

#include "toolbox/attention_math.h"

namespace lab {

uint8_t float_to_e4m3_bits(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  if (std::isnan(f)) return uint8_t(sign | 0x7F);
  const float a = std::fabs(f);
  if (a >= kE4m3Max) return uint8_t(sign | 0x7E);  // satfinite: 448 (0.1111.110)
  // The spacing of e4m3 values around a: 2^(e - 3) for a in [2^e, 2^(e+1)), e >= -6; below 2^-6
  // the subnormal spacing 2^-9. a / spacing rounded half-to-even is exact in fp32 (a power-of-two
  // scaling), and the rounded count gives the code back.
  int e = a > 0.f ? std::ilogb(a) : -6;
  e = std::max(e, -6);
  const float ulp = std::ldexp(1.0f, e - 3);
  const float n = std::nearbyint(a / ulp);  // default rounding mode: half to even
  // n in [8, 16] for a normal binade (16: rounded up into the next one), [0, 8] for subnormals.
  const float v = n * ulp;
  if (v >= kE4m3Max) return uint8_t(sign | 0x7E);  // only 448 itself reaches here (rounding below 448 stops there)
  if (v == 0.f) return sign;
  int ev = std::ilogb(v);
  if (ev < -6) return uint8_t(sign | uint8_t(std::lround(v / std::ldexp(1.0f, -9))));  // subnormal: mantissa only
  const int mant = int(std::lround(v / std::ldexp(1.0f, ev - 3))) - 8;                  // 0..7
  return uint8_t(sign | uint8_t((ev + 7) << 3) | uint8_t(mant));
}

float e4m3_bits_to_float(uint8_t b) {
  const float sign = (b & 0x80) ? -1.f : 1.f;
  const int exp = (b >> 3) & 0xF, mant = b & 0x7;
  if (exp == 0xF && mant == 0x7) return NAN;
  if (exp == 0) return sign * std::ldexp(float(mant), -9);
  return sign * std::ldexp(float(8 + mant), exp - 7 - 3);
}

Fp8Inputs quantise_e4m3(const Problem& p, const HostInputs& in) {
  Fp8Inputs f;
  const int groups = p.b * p.h_kv;
  std::vector<float> amax_q(size_t(groups), 0.f), amax_k(amax_q), amax_v(amax_q);
  for (int b = 0; b < p.b; ++b) {
    for (int i = 0; i < p.t_q; ++i)
      for (int h = 0; h < p.h; ++h) {
        float& m = amax_q[size_t(b * p.h_kv + kv_head_of(h, p.h, p.h_kv))];
        const float* x = &in.q[size_t(p.q_index(b, i, h))];
        for (int c = 0; c < p.d; ++c) m = std::max(m, std::fabs(x[c]));
      }
    for (int j = 0; j < p.t_kv; ++j)
      for (int hk = 0; hk < p.h_kv; ++hk) {
        const size_t at = size_t(p.kv_index(b, j, hk));
        float& mk = amax_k[size_t(b * p.h_kv + hk)];
        float& mv = amax_v[size_t(b * p.h_kv + hk)];
        for (int c = 0; c < p.d; ++c) {
          mk = std::max(mk, std::fabs(in.k[at + size_t(c)]));
          mv = std::max(mv, std::fabs(in.v[at + size_t(c)]));
        }
      }
  }
  for (int g = 0; g < groups; ++g) {
    f.q_scale.push_back(e4m3_scale_of(amax_q[size_t(g)]));
    f.k_scale.push_back(e4m3_scale_of(amax_k[size_t(g)]));
    f.v_scale.push_back(e4m3_scale_of(amax_v[size_t(g)]));
  }
  f.q8.resize(in.q.size());
  f.k8.resize(in.k.size());
  f.v8.resize(in.v.size());
  for (int b = 0; b < p.b; ++b) {
    for (int i = 0; i < p.t_q; ++i)
      for (int h = 0; h < p.h; ++h) {
        const float s = f.q_scale[size_t(b * p.h_kv + kv_head_of(h, p.h, p.h_kv))];
        const size_t at = size_t(p.q_index(b, i, h));
        for (int c = 0; c < p.d; ++c) f.q8[at + size_t(c)] = round_to_e4m3(in.q[at + size_t(c)] / s);
      }
    for (int j = 0; j < p.t_kv; ++j)
      for (int hk = 0; hk < p.h_kv; ++hk) {
        const size_t at = size_t(p.kv_index(b, j, hk));
        const float sk = f.k_scale[size_t(b * p.h_kv + hk)], sv = f.v_scale[size_t(b * p.h_kv + hk)];
        for (int c = 0; c < p.d; ++c) {
          f.k8[at + size_t(c)] = round_to_e4m3(in.k[at + size_t(c)] / sk);
          f.v8[at + size_t(c)] = round_to_e4m3(in.v[at + size_t(c)] / sv);
        }
      }
  }
  return f;
}

HostInputs dequantise(const Problem& p, const Fp8Inputs& f) {
  HostInputs out{f.q8, f.k8, f.v8};
  for (int b = 0; b < p.b; ++b) {
    for (int i = 0; i < p.t_q; ++i)
      for (int h = 0; h < p.h; ++h) {
        const float s = f.q_scale[size_t(b * p.h_kv + kv_head_of(h, p.h, p.h_kv))];
        const size_t at = size_t(p.q_index(b, i, h));
        for (int c = 0; c < p.d; ++c) out.q[at + size_t(c)] *= s;
      }
    for (int j = 0; j < p.t_kv; ++j)
      for (int hk = 0; hk < p.h_kv; ++hk) {
        const size_t at = size_t(p.kv_index(b, j, hk));
        for (int c = 0; c < p.d; ++c) {
          out.k[at + size_t(c)] *= f.k_scale[size_t(b * p.h_kv + hk)];
          out.v[at + size_t(c)] *= f.v_scale[size_t(b * p.h_kv + hk)];
        }
      }
  }
  return out;
}

}  // namespace lab
