// rtvd bench unet, text and kernels: one component alone (a U-Net forward, a text encoder forward, each op at
// its production cases), where bench_command.cpp's frames runs the whole engine.
#pragma once
#include <string>
#include <vector>

namespace rtvd {

int bench_unet_command(const std::vector<std::string>& args);
int bench_text_command(const std::vector<std::string>& args);
int bench_kernels_command(const std::vector<std::string>& args);

}  // namespace rtvd
