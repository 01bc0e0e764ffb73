// attention through cuDNN's SDPA_FWD operation (see attention_cudnn.cuh). One operation graph of one
// node (Q, K, V, O and the scale passed by value; no statistics output, so inference), cuDNN's heuristics
// rank its engines and the first whose execution plan finalises is kept.
#include "kernels/attention/attention_cudnn.cuh"

#include <cstdint>
#include <string>
#include <utility>

#include "kernels/common/alignment.h"
#include "kernels/common/cudnn_error.h"
#include "kernels/common/nvtx_range.h"

namespace rtvd {
namespace {

// Tensor ids of the variant pack.
enum : int64_t { kQ = 1, kK, kV, kO, kScale };
constexpr int64_t kAlignment = 16;  // bytes; attention_cudnn checks the pointers against it

std::string describe(const AttentionParams& p) {
  return cat("batch ", p.batch, ", heads ", p.heads, ", head_dim ", p.head_dim, ", q_len ", p.q_len, ", kv_len ",
             p.kv_len, ", strides q ", p.q_stride, " k ", p.k_stride, " v ", p.v_stride, " o ", p.o_stride,
             p.causal ? ", causal" : "");
}

// Builds descriptors into plan.owned, so that whatever throws midway is still destroyed with the plan.
class Builder {
 public:
  explicit Builder(AttentionCudnnPlan& plan) : plan_(plan) {}

  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    RTVD_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d));
    plan_.owned.push_back(d);
    return d;
  }

  // (batch, heads, tokens, head_dim) over attention.h's layout: token stride `stride`, heads adjacent.
  cudnnBackendDescriptor_t tokens(int64_t uid, const AttentionParams& p, int64_t len, int64_t stride) {
    const int64_t dims[4] = {p.batch, p.heads, len, p.head_dim};
    const int64_t strides[4] = {len * stride, p.head_dim, stride, 1};
    return tensor(uid, CUDNN_DATA_HALF, dims, strides, false);
  }

  cudnnBackendDescriptor_t scalar(int64_t uid) {
    const int64_t ones[4] = {1, 1, 1, 1};
    return tensor(uid, CUDNN_DATA_FLOAT, ones, ones, true);
  }

 private:
  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type, const int64_t (&dims)[4],
                                  const int64_t (&strides)[4], bool by_value) {
    cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
    RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    const int64_t alignment = by_value ? 4 : kAlignment;
    RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
    if (by_value) {
      const bool yes = true;
      RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes));
    }
    RTVD_CUDNN_CHECK(cudnnBackendFinalize(t));
    return t;
  }

  AttentionCudnnPlan& plan_;
};

void set_descriptor(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t value) {
  RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value));
}

}  // namespace

AttentionCudnnPlan::AttentionCudnnPlan(AttentionCudnnPlan&& o) noexcept { *this = std::move(o); }

AttentionCudnnPlan& AttentionCudnnPlan::operator=(AttentionCudnnPlan&& o) noexcept {
  std::swap(handle, o.handle);
  std::swap(plan, o.plan);
  std::swap(owned, o.owned);
  std::swap(workspace_bytes, o.workspace_bytes);
  std::swap(shape, o.shape);
  return *this;
}

AttentionCudnnPlan::~AttentionCudnnPlan() {
  // Users first: the plan holds its engine config, the graph its operation, the operation its tensors.
  for (auto it = owned.rbegin(); it != owned.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
}

AttentionCudnnPlan make_attention_cudnn_plan(const AttentionParams& p, cudnnHandle_t handle) {
  // Before anything else: an unmasked plan must never serve a causal layer.
  if (p.causal) fail("attention (cuDNN): ", kAttentionCudnnNoCausal, " (", describe(p), ")");
#if CUDNN_VERSION < 91300
  (void)handle;
  fail("attention (cuDNN): built against cuDNN ", CUDNN_VERSION, ", whose graph API has no SDPA operation (9.13 has) (",
       describe(p), ")");
#else
  const int width = p.heads * p.head_dim;
  if (p.batch <= 0 || p.heads <= 0 || p.head_dim <= 0 || p.q_len <= 0 || p.kv_len <= 0)
    fail("attention (cuDNN): sizes must be positive (", describe(p), ")");
  if (p.q_stride < width || p.k_stride < width || p.v_stride < width || p.o_stride < width)
    fail("attention (cuDNN): strides must be at least heads * head_dim (", describe(p), ")");
  if (p.head_dim % 8 || p.q_stride % 8 || p.k_stride % 8 || p.v_stride % 8 || p.o_stride % 8)
    fail("attention (cuDNN): head_dim and strides must be multiples of 8 (", describe(p), ")");
  if (!(p.scale > 0.0f)) fail("attention (cuDNN): scale must be positive (", describe(p), ")");

  AttentionCudnnPlan out;
  out.handle = handle;
  out.shape = p;
  Builder b(out);
  const cudnnBackendDescriptor_t op = b.make(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR);
  set_descriptor(op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, b.tokens(kQ, p, p.q_len, p.q_stride));
  set_descriptor(op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, b.tokens(kK, p, p.kv_len, p.k_stride));
  set_descriptor(op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, b.tokens(kV, p, p.kv_len, p.v_stride));
  set_descriptor(op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, b.tokens(kO, p, p.q_len, p.o_stride));
  set_descriptor(op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, b.scalar(kScale));
  RTVD_CUDNN_CHECK(cudnnBackendFinalize(op));

  const cudnnBackendDescriptor_t graph = b.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  set_descriptor(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, op);
  RTVD_CUDNN_CHECK(cudnnBackendFinalize(graph));

  const cudnnBackendDescriptor_t heuristics = b.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  set_descriptor(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  RTVD_CUDNN_CHECK(cudnnBackendFinalize(heuristics));
  int64_t count = 0;
  RTVD_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < count; ++i) configs.push_back(b.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
  RTVD_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                            count, &count, configs.data()));
  for (int64_t i = 0; i < count && !out.plan; ++i) {
    const cudnnBackendDescriptor_t plan = b.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
    set_descriptor(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[i]);
    if (cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS) out.plan = plan;  // else: the next-ranked engine
  }
  if (!out.plan) fail("attention (cuDNN): no SDPA engine of cuDNN ", cudnnGetVersion(), " runs ", describe(p));
  int64_t workspace = 0;
  RTVD_CUDNN_CHECK(cudnnBackendGetAttribute(out.plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                            nullptr, &workspace));
  out.workspace_bytes = size_t(workspace);
  return out;
#endif
}

void attention_cudnn(const AttentionParams& p, const AttentionCudnnPlan& plan, const CudaContext& ctx) {
  const AttentionParams& s = plan.shape;
  if (p.batch != s.batch || p.heads != s.heads || p.head_dim != s.head_dim || p.q_len != s.q_len ||
      p.kv_len != s.kv_len || p.q_stride != s.q_stride || p.k_stride != s.k_stride || p.v_stride != s.v_stride ||
      p.o_stride != s.o_stride || p.scale != s.scale || p.causal != s.causal)
    fail("attention (cuDNN): called with ", describe(p), ", scale ", p.scale, " on a plan for ", describe(s),
         ", scale ", s.scale);
  if (!aligned(p.q, kAlignment) || !aligned(p.k, kAlignment) || !aligned(p.v, kAlignment) || !aligned(p.o, kAlignment))
    fail("attention (cuDNN): q, k, v and o must be 16-byte aligned (", describe(p), ")");
  if (ctx.workspace_bytes < plan.workspace_bytes)
    fail("attention (cuDNN): needs ", plan.workspace_bytes, " bytes of workspace, the context has ", ctx.workspace_bytes);
  const NvtxRange range("attention_cudnn");
  RTVD_CUDNN_CHECK(cudnnSetStream(plan.handle, ctx.stream));
  float scale = p.scale;
  const int64_t uids[5] = {kQ, kK, kV, kO, kScale};
  void* pointers[5] = {const_cast<void*>(p.q), const_cast<void*>(p.k), const_cast<void*>(p.v), p.o, &scale};
  void* workspace = ctx.workspace;
  cudnnBackendDescriptor_t pack = nullptr;
  RTVD_CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack));
  struct Destroy {
    cudnnBackendDescriptor_t d;
    ~Destroy() { cudnnBackendDestroyDescriptor(d); }
  } destroy{pack};
  RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 5, uids));
  RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 5, pointers));
  RTVD_CUDNN_CHECK(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  RTVD_CUDNN_CHECK(cudnnBackendFinalize(pack));
  RTVD_CUDNN_CHECK(cudnnBackendExecute(plan.handle, plan.plan, pack));
}

}  // namespace rtvd
