// A prompt and a tokenizer folder's files -> ClipTokenizer::builtin and ClipTokenizer::from_files, encode,
// encode_context and a rewrite (fuzz_targets.h). clip_tokenizer_fuzzer is this alone, with libFuzzer's byte
// mutations; clip_tokenizer_structured_fuzzer adds clip_tokenizer_mutator.cpp.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rtvd::fuzz::clip_tokenizer({data, size});
  } catch (const rtvd::Error&) {
  }
  return 0;
}
