// What tools/reference/export_clip_text.py writes beside a text encoder: its input ids and transformers'
// hidden states (fp32) with clip skip 0, 1 and 2.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rtvd::test {

struct ClipTextExpected {
  std::vector<int32_t> ids;  // (batch, 77)
  int batch = 0;
  std::vector<float> hidden[3];  // by clip skip: (batch, 77, width)
};

ClipTextExpected read_clip_text_expected(const std::string& path);

}  // namespace rtvd::test
