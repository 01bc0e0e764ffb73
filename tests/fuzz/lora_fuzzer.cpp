// A LoRA file -> apply_lora on a small SD-like model, and its merged weights read back (fuzz_targets.h).
// lora_fuzzer is this alone, with libFuzzer's byte mutations; lora_structured_fuzzer adds lora_mutator.cpp.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rtvd::fuzz::lora({data, size});
  } catch (const rtvd::Error&) {
  }
  return 0;
}
