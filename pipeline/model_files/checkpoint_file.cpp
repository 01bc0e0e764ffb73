#include "pipeline/model_files/checkpoint_file.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "pipeline/model_files/input_file.h"

namespace rtvd {

namespace {

[[noreturn]] void refuse(const std::string& path, std::string_view what) {
  fail(path, ": a pickle ", what, ", which rtvd never unpickles (loading one can run code from the file): convert "
       "it to .safetensors where you trust it, e.g. with torch.load(..., weights_only=True) and "
       "safetensors.torch.save_file, or diffusers' scripts/convert_original_stable_diffusion_to_diffusers.py");
}

bool has_pickle_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::ranges::transform(ext, ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".ckpt" || ext == ".pt" || ext == ".pth" || ext == ".bin" || ext == ".pkl" || ext == ".pickle";
}

// torch.save's zip archive ("PK\3\4"), or a bare pickle (PROTO opcode 0x80, protocol 2 to 5).
bool starts_like_pickle(const std::string& path) {
  if (!regular_file_problem(path).empty()) return false;  // a FIFO would block the read
  std::array<char, 4> head{};
  std::ifstream in(path, std::ios::binary);
  if (!in.read(head.data(), head.size())) return false;
  const auto b = [&](int i) { return uint8_t(head[size_t(i)]); };
  return (head[0] == 'P' && head[1] == 'K' && b(2) == 3 && b(3) == 4) || (b(0) == 0x80 && b(1) >= 2 && b(1) <= 5);
}

}  // namespace

std::shared_ptr<const SafeTensorsFile> open_checkpoint_file(const std::string& path, std::string_view what) {
  if (has_pickle_extension(path)) refuse(path, what);
  try {
    return std::make_shared<const SafeTensorsFile>(SafeTensorsFile::open(path));
  } catch (const Error&) {
    if (starts_like_pickle(path)) refuse(path, what);
    throw;
  }
}

}  // namespace rtvd
