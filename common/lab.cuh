// The one include of a section program: the harness (harness.h), CUDA error checks, the shared
// index helpers (attention_math.h) and the element types. A section file reads top to bottom:
// header comment -> #include "lab.cuh" -> tile constants -> kernels -> launcher -> CPU model ->
// a main() that hands the Section to lab::lab_main.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "toolbox/attention_math.h"
#include "toolbox/cuda_check.h"
#include "harness/harness.h"
#include "harness/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#ifndef LAB_BUILD_KIND
#define LAB_BUILD_KIND "solution"
#endif

namespace lab {
inline int lab_main(int argc, char** argv, Section section) {
  section.build = LAB_BUILD_KIND;
  return run_section(argc, argv, section);
}
}  // namespace lab
