// A PNG file -> read_png, and write_png's output read back (fuzz_targets.h). png_fuzzer is this alone, with
// libFuzzer's byte mutations; png_structured_fuzzer adds png_mutator.cpp.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rtvd::fuzz::png({data, size});
  } catch (const rtvd::Error&) {
  }
  return 0;
}
