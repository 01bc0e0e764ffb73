// Opening a weights file that the user names (a single-file checkpoint, a LoRA): safetensors only. A pickle
// (.ckpt, .pt, .pth, .bin, .pkl) can run code when it is loaded, so rtvd never unpickles one: it is refused by
// its name before a byte of it is read, or, under another name, once it fails to parse as safetensors and its
// first bytes are a zip or pickle signature.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "pipeline/model_files/safetensors.h"

namespace rtvd {

// what names the file's role in the error ("checkpoint", "LoRA").
std::shared_ptr<const SafeTensorsFile> open_checkpoint_file(const std::string& path, std::string_view what);

}  // namespace rtvd
