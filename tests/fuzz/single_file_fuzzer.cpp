// A single-file checkpoint -> read_single_file, its components' views and configs checked, and the same bytes as
// a ControlNet -> read_controlnet_single_file (fuzz_targets.h).
// single_file_fuzzer is this alone, with libFuzzer's byte mutations; single_file_structured_fuzzer adds
// single_file_mutator.cpp.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rtvd::fuzz::single_file({data, size});
  } catch (const rtvd::Error&) {
  }
  try {
    rtvd::fuzz::controlnet_single_file({data, size});
  } catch (const rtvd::Error&) {
  }
  return 0;
}
