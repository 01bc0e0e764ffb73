#include "support/clip_text_expected.h"

#include <cstring>

#include "base/error.h"
#include "pipeline/model_files/safetensors.h"

namespace rtvd::test {

ClipTextExpected read_clip_text_expected(const std::string& path) {
  const SafeTensorsFile f = SafeTensorsFile::open(path);
  const auto copy = [&](const char* name, DType dtype, auto& out) {
    const TensorView* t = f.find(name);
    if (!t || t->dtype != dtype) fail(path, ": no ", dtype_name(dtype), " tensor ", name);
    out.resize(size_t(t->numel()));
    std::memcpy(out.data(), t->data, t->bytes);
    return t;
  };
  ClipTextExpected e;
  e.batch = int(copy("input_ids", DType::I32, e.ids)->shape.at(0));
  copy("last_hidden_state", DType::F32, e.hidden[0]);
  copy("clip_skip_1", DType::F32, e.hidden[1]);
  copy("clip_skip_2", DType::F32, e.hidden[2]);
  return e;
}

}  // namespace rtvd::test
