#include "pipeline/models/graph_emitter.h"

#include <cmath>

namespace rtvd {

namespace {

double elems(int64_t a) { return static_cast<double>(a); }

}  // namespace

Ref GraphEmitter::matrix(const std::string& name, int out, int in) {
  return weights_.get(name, Elem::Act, [&] { return WeightTensor::stacked({out, in}, {weights_.view(name, {out, in})}); });
}

Ref GraphEmitter::vector(const std::string& name, int n) {
  return weights_.get(name, Elem::F32, [&] { return WeightTensor::floats({n}, weights_.read(name, {n})); });
}

Ref GraphEmitter::new_act(const std::string& name, std::vector<int64_t> shape) {
  return g_.add_tensor(tag_.empty() ? name : tag_ + "." + name, Elem::Act, std::move(shape));
}

void GraphEmitter::emit(const std::string& layer, OpBody body, double flops, double bytes) {
  ops_->push_back(Op{layer, std::move(body), flops, bytes});
}

Ref GraphEmitter::linear(const std::string& layer, Ref x, int rows, int in, int out, Ref w, Ref bias, Ref residual,
                         Activation act) {
  LinearOp op;
  op.p.m = rows;
  op.p.n = out;
  op.p.k = in;
  op.p.act = act;
  op.x = x;
  op.w = w;
  op.bias = bias;
  op.residual = residual;
  op.y = new_act(layer, {rows, out});
  Ref y = op.y;
  const double bytes = act_bytes_ * (elems(int64_t(rows) * in) + elems(int64_t(out) * in) +
                                     elems(int64_t(rows) * out) * (residual ? 2 : 1));
  emit(layer, std::move(op), 2.0 * rows * out * elems(in), bytes);
  return y;
}

Ref GraphEmitter::layer_norm(const std::string& layer, Ref x, int rows, int c, float eps) {
  LayerNormOp op;
  op.p.rows = rows;
  op.p.c = c;
  op.p.eps = eps;
  op.x = x;
  op.gamma = vector(layer + ".weight", c);
  op.beta = vector(layer + ".bias", c);
  op.y = new_act(layer, {rows, c});
  Ref y = op.y;
  emit(layer, std::move(op), 0, 2.0 * act_bytes_ * rows * elems(c));
  return y;
}

Ref GraphEmitter::attention(const std::string& layer, Ref q, Ref k, Ref v, int batch, int heads, int q_len, int kv_len,
                            int c, int q_stride, int kv_stride, bool causal) {
  AttentionOp op;
  AttentionParams& p = op.p;
  p.batch = batch;
  p.heads = heads;
  p.head_dim = c / heads;
  p.q_len = q_len;
  p.kv_len = kv_len;
  p.q_stride = q_stride;
  p.k_stride = p.v_stride = kv_stride;
  p.o_stride = c;
  p.scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  p.causal = causal;
  op.q = q;
  op.k = k;
  op.v = v;
  op.o = new_act(layer, {int64_t(batch) * q_len, c});
  Ref o = op.o;
  // A causal mask skips about half of the score matrix.
  const double flops = 4.0 * batch * q_len * elems(kv_len) * c * (causal ? 0.5 : 1.0);
  emit(layer, std::move(op), flops, act_bytes_ * elems(int64_t(batch) * (2 * q_len + 2 * kv_len) * c));
  return o;
}

}  // namespace rtvd
