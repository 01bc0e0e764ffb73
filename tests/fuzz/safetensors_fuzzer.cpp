// A safetensors file -> SafeTensorsFile::from_memory, each tensor's bytes, and a rebuild (fuzz_targets.h).
// safetensors_fuzzer is this alone, with libFuzzer's byte mutations; safetensors_structured_fuzzer adds
// safetensors_mutator.cpp.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rtvd::fuzz::safetensors({data, size});
  } catch (const rtvd::Error&) {
  }
  return 0;
}
