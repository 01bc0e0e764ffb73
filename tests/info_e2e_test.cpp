// rtvd info through the binary: what it says about the build (a build without CUDA says why, and lists no
// CUDA architectures), and the model's parameters per component and module against the element counts
// of the safetensors files themselves, read without rtvd's reader.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "build_config.h"
#include "support/process.h"
#include "support/sdxl_folder.h"
#include "support/tensor_files.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

test::RunResult rtvd_info(const std::vector<std::string>& args) {
  const test::TempDir logs("rtvd_info");
  std::vector<std::string> all = {"info", "--device", "cpu"};
  all.insert(all.end(), args.begin(), args.end());
  return test::run_program(test::rtvd_binary(), all, test::environment(), logs.dir(), 120);
}

int64_t sum(const std::map<std::string, int64_t>& counts) {
  int64_t n = 0;
  for (const auto& [name, c] : counts) n += c;
  return n;
}

struct Component {
  int64_t parameters = 0;
  std::map<std::string, int64_t> modules;
};

// The parameters line's total and each component with its modules, from info's output.
struct Parameters {
  int64_t total = -1;
  std::map<std::string, Component> components;
};

Parameters parse_parameters(const std::string& out) {
  Parameters p;
  std::istringstream lines(out);
  std::string line, current;
  std::smatch m;
  bool in_section = false;
  while (std::getline(lines, line)) {
    if (std::regex_match(line, m, std::regex("  parameters +(\\d+)( = .*)?"))) {
      p.total = std::stoll(m[1]);
      in_section = true;
    } else if (!in_section) {
      continue;
    } else if (std::regex_match(line, m, std::regex("    (\\S+) +(\\d+)  .*"))) {
      current = m[1];
      p.components[current].parameters = std::stoll(m[2]);
    } else if (std::regex_match(line, m, std::regex("      (\\S+) +(\\d+)"))) {
      p.components[current].modules[m[1]] = std::stoll(m[2]);
    } else {
      break;
    }
  }
  return p;
}

// Each component's count is its file's, each module's the elements of the tensors under it, and the
// modules and the components add up.
void expect_counts(const Parameters& p, const std::map<std::string, std::string>& files, const std::string& out) {
  ASSERT_EQ(p.components.size(), files.size()) << out;
  int64_t total = 0;
  for (const auto& [name, file] : files) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(p.components.count(name)) << out;
    const Component& c = p.components.at(name);
    const std::map<std::string, int64_t> tensors = test::safetensors_elements(file);
    EXPECT_EQ(c.parameters, sum(tensors)) << out;
    total += sum(tensors);
    int64_t modules = 0;
    for (const auto& [module, n] : c.modules) {
      modules += n;
      int64_t under = 0;  // the file's tensors in this module (a CLIP file's names start with text_model.)
      for (const auto& [tensor, count] : tensors)
        if (tensor.starts_with(module + ".") || tensor.starts_with("text_model." + module + ".")) under += count;
      EXPECT_EQ(n, under) << module;
    }
    EXPECT_EQ(modules, c.parameters) << "the modules add up to the component";
  }
  EXPECT_EQ(p.total, total) << "the components add up to the total:\n" << out;
}

TEST(InfoE2E, ASdModelsParametersAreEachComponentsFileLabelledAndAddUp) {
  const test::RunResult r = rtvd_info({"--model", test::test_data("tiny_sd")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Parameters p = parse_parameters(r.out);
  expect_counts(p,
                {{"unet", test::test_data("tiny_sd/unet/diffusion_pytorch_model.safetensors")},
                 {"vae", test::test_data("tiny_sd/vae/diffusion_pytorch_model.safetensors")},
                 {"text_encoder", test::test_data("tiny_sd/text_encoder/model.safetensors")}},
                r.out);
  EXPECT_NE(r.out.find(" = unet "), std::string::npos) << "the sum is spelled out:\n" << r.out;
}

TEST(InfoE2E, AnSdxlModelListsBothTextEncodersAndItsAddedConditioning) {
  const test::TempDir tmp("rtvd_info_sdxl");
  const std::string dir = tmp.path("sdxl");
  test::write_random_sdxl_folder(dir);
  const test::RunResult r = rtvd_info({"--model", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_counts(parse_parameters(r.out),
                {{"unet", dir + "/unet/diffusion_pytorch_model.safetensors"},
                 {"vae", dir + "/vae/diffusion_pytorch_model.safetensors"},
                 {"text_encoder", dir + "/text_encoder/model.safetensors"},
                 {"text_encoder_2", dir + "/text_encoder_2/model.safetensors"}},
                r.out);
  EXPECT_NE(r.out.find("  context      77x32\n  added        pooled text 32 + 6 time ids x 8 (SDXL's text_time)\n"),
            std::string::npos) << r.out;
}

TEST(InfoE2E, TheDefaultModelsParametersAreItsFiles) {
  const test::RunResult r = rtvd_info({});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_counts(parse_parameters(r.out), {{"unet", test::assets_dir() + "/default/weights.safetensors"}}, r.out);
}

// A build without CUDA says why: turned off at configure time (quickstart's CPU build), or no toolkit.
TEST(InfoE2E, ABuildWithoutCudaSaysWhyAndListsNoArchitectures) {
  if (RTVD_HAS_CUDA) GTEST_SKIP() << "this build has the CUDA backend";
  const test::RunResult r = rtvd_info({});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("CUDA backend no,"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("archs"), std::string::npos) << "no CUDA architectures in a build without CUDA:\n" << r.out;
  EXPECT_EQ(r.out.find("architectures"), std::string::npos) << r.out;
  const bool turned_off = !RTVD_WITH_CUDA;
  EXPECT_EQ(r.out.find("configured with -DRTVD_WITH_CUDA=OFF") != std::string::npos, turned_off) << r.out;
  EXPECT_EQ(r.out.find("-DRTVD_WITH_CUDA=ON") != std::string::npos, turned_off) << "how to turn it on:\n" << r.out;
  EXPECT_EQ(r.out.find("no CUDA toolkit") != std::string::npos, !turned_off) << r.out;
}

}  // namespace
}  // namespace rtvd
