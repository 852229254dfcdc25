// Host conversions to fp16/bf16: the inputs the GPU sees are made with these, so they must be
// exactly the hardware's round-to-nearest-even.
#include <catch2/catch.hpp>
#include <cmath>

#include "harness/dtype.h"

using namespace lab;

TEST_CASE("fp16 conversion: known values, rounding ties to even, overflow, subnormals", "[dtype]") {
  CHECK(float_to_half_bits(1.0f) == 0x3C00);
  CHECK(float_to_half_bits(-2.0f) == 0xC000);
  CHECK(float_to_half_bits(65504.0f) == 0x7BFF);                 // largest half
  CHECK(float_to_half_bits(65519.0f) == 0x7BFF);                 // rounds down
  CHECK(float_to_half_bits(65520.0f) == 0x7C00);                 // rounds to inf
  CHECK(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie -> even (down)
  CHECK(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie -> even (up)
  CHECK(float_to_half_bits(std::ldexp(1.0f, -24)) == 0x0001);    // smallest subnormal
  CHECK(float_to_half_bits(std::ldexp(1.0f, -26)) == 0x0000);    // underflows to zero
  CHECK(float_to_half_bits(std::ldexp(1.0f, -14)) == 0x0400);    // smallest normal
  CHECK(half_bits_to_float(0x3555) == Approx(0.333251953125f));
  CHECK(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
}

TEST_CASE("fp16: every finite half value survives a round trip through float", "[dtype]") {
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (((h >> 10) & 0x1F) == 0x1F) continue;  // inf / NaN
    if (float_to_half_bits(half_bits_to_float(uint16_t(h))) != h) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("bf16 conversion rounds to nearest even", "[dtype]") {
  CHECK(float_to_bf16_bits(1.0f) == 0x3F80);
  CHECK(float_to_bf16_bits(bits_float(0x3F808000u)) == 0x3F80);  // tie -> even
  CHECK(float_to_bf16_bits(bits_float(0x3F818000u)) == 0x3F82);  // tie -> even (up)
  CHECK(float_to_bf16_bits(bits_float(0x3F808001u)) == 0x3F81);
  CHECK(round_to(DType::bf16, 3.14159265f) == 3.140625f);
  CHECK(round_to(DType::f32, 3.14159265f) == 3.14159265f);
}

TEST_CASE("the poison pattern is a NaN that arithmetic does not produce", "[dtype]") {
  CHECK(std::isnan(poison_float()));
  CHECK(is_poison(poison_float()));
  const volatile float zero = 0.0f;
  CHECK_FALSE(is_poison(zero / zero));  // a computed NaN is not "unwritten"
  CHECK(std::isnan(half_bits_to_float(kPoisonBits16)));
}
