// config.json -> parse_model_config -> unet_parameters (fuzz_targets.h). model_config_fuzzer is this alone,
// with libFuzzer's byte mutations; model_config_structured_fuzzer adds model_config_mutator.cpp.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rtvd::fuzz::model_config({data, size});
  } catch (const rtvd::Error&) {
  }
  return 0;
}
