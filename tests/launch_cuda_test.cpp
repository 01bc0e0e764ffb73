// Programmatic dependent launch (kernels/common/launch.cuh): the RTVD_PDL switch, and a chain of dependent
// kernels against the CPU reference, eager and captured as a CUDA graph and replayed.
//
// The chain ping-pongs between two buffers, so each kernel reads what the one before wrote (a wait too early
// or missing reads stale or poisoned values) and overwrites what the one before read (a write too early
// corrupts its input); a memset stands between the last round and the concat that reads it (an ordinary
// graph node among programmatic launches). Each run starts from the source and NaN-poisoned buffers, the
// tensors take more than one wave of blocks, and every element is compared: one read too early fails.
// With RTVD_PDL unset or 1 on an sm_90+ device, in a build with sm_90 code, the captured graph must have
// programmatic edges; with RTVD_PDL=0, none. Run both ways: `RTVD_PDL=0 ./launch_cuda_test`.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "build_config.h"
#include "kernels/common/launch.cuh"
#include "kernels/elementwise/elementwise.cuh"
#include "pipeline/backends/cuda/cuda_graph.h"
#include "pipeline/model_files/half.h"
#include "support/cuda_test_util.h"

namespace rtvd {
namespace {

TEST(PdlSetting, OnUnlessZero) {
  EXPECT_TRUE(pdl_setting(nullptr));
  EXPECT_TRUE(pdl_setting("1"));
  EXPECT_FALSE(pdl_setting("0"));
}

TEST(PdlSetting, RefusesOtherValuesNamingTheVariable) {
  for (const char* bad : {"", "yes", "2", "0 "}) {
    try {
      pdl_setting(bad);
      ADD_FAILURE() << "accepted RTVD_PDL='" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("RTVD_PDL: expected 0"), std::string::npos) << e.what();
    }
  }
}

// Whether this build has sm_90 (or later) code for a device of compute capability >= 9.0 to run:
// RTVD_CUDA_ARCHITECTURES as CMake took it ("80;86;89;90a", "80", "native").
bool built_for_sm90() {
  std::stringstream archs(RTVD_CUDA_ARCHITECTURES);
  for (std::string a; std::getline(archs, a, ';');) {
    if (a == "native" || a == "all" || a == "all-major") return true;
    if (std::atoi(a.c_str()) >= 90) return true;
  }
  return false;
}

constexpr int kChannels = 64;               // the concat's halves
constexpr size_t kCount = size_t(1) << 22;  // 8 MB of fp16: 2048 blocks of the elementwise kernels, > 1 wave
constexpr int kRounds = 5;  // odd: the result is not the source, which each run copies in again

// y = in_scale x + in_shift: a step of the chain, whose result is exact in fp16 up to rounding.
ScaleActivationParams affine(const void* x, void* y, size_t count, float in_scale, float in_shift) {
  ScaleActivationParams p;
  p.x = x;
  p.y = y;
  p.count = int64_t(count);
  p.in_scale = in_scale;
  p.in_shift = in_shift;
  return p;
}

// One round: b = a + 1, then a = 0.5 - b = -a - 0.5. Two rounds give a again, so values stay small; a kernel
// that reads its input one step early reads values off by |2 a + 0.5|.
template <class Run>
void round_of_chain(void* a, void* b, size_t count, Run run) {
  run(affine(a, b, count, 1.0f, 1.0f));
  run(affine(b, a, count, -1.0f, 0.5f));
}

// The chain on the CPU, each result rounded to fp16 as the device stores it: kRounds rounds, then [a | 0]
// (pixels, 2 kChannels).
std::vector<float> chain_cpu(std::vector<float> a) {
  std::vector<float> b(a.size());
  for (int r = 0; r < kRounds; ++r)
    round_of_chain(a.data(), b.data(), a.size(), [](const ScaleActivationParams& p) {
      scale_activation_cpu(p);
      float* y = static_cast<float*>(p.y);
      for (int64_t i = 0; i < p.count; ++i) y[i] = half_to_float(float_to_half(y[i]));
    });
  const std::vector<float> zero(a.size(), 0.0f);
  std::vector<float> y(2 * a.size());
  concat_cpu(ConcatParams{a.data(), zero.data(), y.data(), int64_t(a.size() / kChannels), kChannels, kChannels});
  return y;
}

class PdlChain : public testing::Test {
 protected:
  void SetUp() override {
    RTVD_SKIP_WITHOUT_CUDA();
    host_ = std::make_unique<CudaHost>();
    source_ = test::half_tensor(rng_.normal_vector(kCount, 2.0f));
    a_ = test::poisoned_half(kCount);
    b_ = test::poisoned_half(kCount);
    y_ = test::poisoned_half(2 * kCount);
  }

  // The chain on the device: the source copied in, the other buffers poisoned, the rounds (each kernel
  // directly after the one it reads), a memset and the concat that reads it.
  void queue() const {
    const CudaContext& ctx = host_->ctx();
    RTVD_CUDA_CHECK(cudaMemcpyAsync(a_.get(), source_.get(), kCount * 2, cudaMemcpyDeviceToDevice, ctx.stream));
    RTVD_CUDA_CHECK(cudaMemsetAsync(b_.get(), 0xff, kCount * 2, ctx.stream));  // fp16 NaN
    RTVD_CUDA_CHECK(cudaMemsetAsync(y_.get(), 0xff, 2 * kCount * 2, ctx.stream));
    for (int r = 0; r < kRounds; ++r)
      round_of_chain(a_.get(), b_.get(), kCount, [&](const ScaleActivationParams& p) { scale_activation(p, ctx); });
    RTVD_CUDA_CHECK(cudaMemsetAsync(b_.get(), 0, kCount * 2, ctx.stream));
    concat(ConcatParams{a_.get(), b_.get(), y_.get(), int64_t(kCount / kChannels), kChannels, kChannels}, ctx);
  }

  // Every element within an fp16 rounding of the reference (finite); names the first that is not.
  void expect_matches(const std::vector<float>& expected, const char* what) const {
    const std::vector<float> got = test::from_device_half(y_, expected.size());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(got[i] - expected[i]) <= 2e-2f) && bad++ == 0) first = i;  // 1 ulp below 32, NaN fails
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements differ, the first at " << first
                       << ": " << got[first] << " against " << expected[first];
  }

  test::Rng rng_;
  std::unique_ptr<CudaHost> host_;
  test::HalfTensor source_;
  DeviceMemory a_, b_, y_;
};

size_t programmatic_edges(cudaGraph_t graph) {
  size_t count = 0;
#if CUDART_VERSION >= 13000
  RTVD_CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count), to(count);
  std::vector<cudaGraphEdgeData> data(count);
  RTVD_CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &count));
#else
  RTVD_CUDA_CHECK(cudaGraphGetEdges_v2(graph, nullptr, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count), to(count);
  std::vector<cudaGraphEdgeData> data(count);
  RTVD_CUDA_CHECK(cudaGraphGetEdges_v2(graph, from.data(), to.data(), data.data(), &count));
#endif
  size_t programmatic = 0;
  for (const cudaGraphEdgeData& e : data) programmatic += e.type == cudaGraphDependencyTypeProgrammatic;
  return programmatic;
}

TEST_F(PdlChain, EagerMatchesCpu) {
  SCOPED_TRACE(test::seed_trace(rng_));
  for (int i = 0; i < 3; ++i) queue();
  RTVD_CUDA_CHECK(cudaStreamSynchronize(host_->stream()));
  expect_matches(chain_cpu(source_.host), "eager");
}

TEST_F(PdlChain, GraphReplaysMatchCpu) {
  SCOPED_TRACE(test::seed_trace(rng_));
  const cudaStream_t stream = host_->stream();
  const cudaGraph_t graph = capture_stream(stream, [&] { queue(); });
  const size_t programmatic = programmatic_edges(graph);
  const bool expected = pdl_enabled() && host_->ctx().sm_version >= 90 && built_for_sm90();
  // Every kernel of the rounds but the first follows a kernel: 2 kRounds - 1 programmatic edges.
  if (expected) EXPECT_EQ(programmatic, size_t(2 * kRounds - 1)) << "PDL on, sm_" << host_->ctx().sm_version;
  else EXPECT_EQ(programmatic, 0u) << "PDL " << (pdl_enabled() ? "on" : "off") << ", sm_" << host_->ctx().sm_version;
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  RTVD_CUDA_CHECK(instantiated);
  const std::vector<float> expected_y = chain_cpu(source_.host);
  for (int replay = 0; replay < 20; ++replay) {
    RTVD_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    RTVD_CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_matches(expected_y, "graph replay");
    if (HasFailure()) break;
  }
  cudaGraphExecDestroy(exec);
}

}  // namespace
}  // namespace rtvd
