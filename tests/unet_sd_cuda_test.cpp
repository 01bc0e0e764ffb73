// The SD-class U-Nets on the CUDA backend (fp16) against the PyTorch reference, with every kernel
// family: the scaled-down SD 2.1 / 1.5 structures against their float64 goldens (always), and the
// full-size models against PyTorch on the GPU machine, from files that
// tools/reference/export_sd_parity.py writes there (1.7 GB of fp16 weights each: never committed):
//
//   RTVD_SD_PARITY_DIR=/tmp/rtvd-sd tests/unet_sd_cuda_test
//
// with <dir>/sd21 and <dir>/sd15 each holding config.json, weights.safetensors and io.safetensors (x, t,
// context, v: PyTorch's output in fp32 from the fp16 weights; v_half: PyTorch's own fp16 output).
// Without the variable or a device the tests skip.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "pipeline/device.h"
#include "pipeline/unet_runner.h"
#include "support/cuda_test_util.h"
#include "support/golden.h"
#include "support/test_util.h"

namespace rtvd {
namespace {

constexpr const char* kKernels[] = {"custom", "cudnn"};

// rtvd on the GPU for a golden case; the relative L2 error against the reference.
double gpu_error(Model& model, const test::GoldenCase& g, const std::string& kernels) {
  std::string why;
  auto gpu = make_backend(DeviceKind::Cuda, 0, kernel_family_named(kernels), &why);
  UNetRunner run(model.config, *model.weights, *gpu, g.batch, g.height, g.width, g.t);
  model.weights->check_all_read();
  run.set_inputs(g.x, g.class_ids, g.context);
  run.forward();
  return test::rel_l2(run.output(), g.v);
}

void check_scaled_down(const std::string& name, const std::string& suffix) {
  const std::string dir = test::test_data(name);
  Model model = test::generated_golden_model(dir);
  const test::GoldenCase g = test::read_golden(SafeTensorsFile::open(dir + "/golden.safetensors"), suffix);
  for (const char* kernels : kKernels) EXPECT_LE(gpu_error(model, g, kernels), 1e-2) << name << suffix << " " << kernels;
}

TEST(UNetSdCuda, Sd21StructureScaledDownMatchesPyTorch) {
  RTVD_SKIP_WITHOUT_CUDA();
  check_scaled_down("sd21_small", "");
  check_scaled_down("sd21_small", "2");
}

TEST(UNetSdCuda, Sd15StructureScaledDownMatchesPyTorch) {
  RTVD_SKIP_WITHOUT_CUDA();
  check_scaled_down("sd15_small", "");
  check_scaled_down("sd15_small", "2");
}

// The full-size model `name` against PyTorch: relative L2 <= 1e-2, recorded per kernel family (with
// PyTorch's own fp16 error for scale) as test properties, which tools/compare_unet.py reads back.
void check_full_size(const std::string& name) {
  const char* root = std::getenv("RTVD_SD_PARITY_DIR");
  if (!root) GTEST_SKIP() << "RTVD_SD_PARITY_DIR is not set (tools/reference/export_sd_parity.py writes the files)";
  const std::string dir = std::string(root) + "/" + name;
  if (!std::filesystem::exists(dir + "/io.safetensors")) GTEST_SKIP() << "no " << dir << "/io.safetensors";
  Model model = load_model({.path = dir});
  const SafeTensorsFile io = SafeTensorsFile::open(dir + "/io.safetensors");
  const test::GoldenCase g = test::read_golden(io);
  if (const TensorView* half = io.find("v_half"))
    testing::Test::RecordProperty("torch_fp16_rel_l2", cat(test::rel_l2(test::floats(*half), g.v)));
  for (const char* kernels : kKernels) {
    const double err = gpu_error(model, g, kernels);
    testing::Test::RecordProperty(std::string("rel_l2_") + kernels, cat(err));
    EXPECT_LE(err, 1e-2) << name << " " << kernels;
  }
}

TEST(UNetSdCuda, Sd21FullSizeMatchesPyTorch) {
  RTVD_SKIP_WITHOUT_CUDA();
  check_full_size("sd21");
}

TEST(UNetSdCuda, Sd15FullSizeMatchesPyTorch) {
  RTVD_SKIP_WITHOUT_CUDA();
  check_full_size("sd15");
}

}  // namespace
}  // namespace rtvd
