#include "pipeline/models/graph_emitter.h"

#include <cmath>

namespace rtvd {

namespace {

double elems(int64_t a) { return static_cast<double>(a); }
std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

}  // namespace

Ref GraphEmitter::matrix(const std::string& name, int out, int in) {
  const std::string k = param(name);
  return weights_.get(k, Elem::Act, [&] { return WeightTensor::stacked({out, in}, {weights_.view(k, {out, in})}); });
}

Ref GraphEmitter::vector(const std::string& name, int n) {
  const std::string k = param(name);
  return weights_.get(k, Elem::F32, [&] { return WeightTensor::floats({n}, weights_.read(k, {n})); });
}

Ref GraphEmitter::conv_weight(const std::string& name, int out, int in, int k) {
  const std::string key = param(name);
  return weights_.get(key, Elem::Act, [&] {
    return WeightTensor::stacked({out, k, k, in}, {weights_.view(key, {out, in, k, k})}, true);
  });
}

Ref GraphEmitter::bias_in_act_type(Ref bias) {
  // fp32 activations (the CPU's): the bias already is in their type, and no library wants another.
  if (act_bytes_ == 4 || bias.kind != Ref::Weight || bias.offset != 0) return {};
  const WeightTensor& f32 = weights_.tensors().at(size_t(bias.id));
  return weights_.get(f32.name + ".act", Elem::Act, [&] { return WeightTensor::act_floats(f32.shape, f32.values); });
}

Ref GraphEmitter::constant(const std::string& name, int n, float value) {
  return weights_.get(param(name), Elem::F32, [&] { return WeightTensor::floats({n}, std::vector<float>(size_t(n), value)); });
}

GraphEmitter::ConvArgs GraphEmitter::conv_args(const std::string& name, int out, int in, int k, bool with_bias) {
  ConvArgs a;
  a.w = conv_weight(name + ".weight", out, in, k);
  if (with_bias) a.bias = vector(name + ".bias", out);
  a.out = out;
  a.k = k;
  a.pad = k / 2;
  return a;
}

Ref GraphEmitter::new_act(const std::string& name, std::vector<int64_t> shape) {
  return g_.add_tensor(join(tag_, param(name)), Elem::Act, std::move(shape));
}

void GraphEmitter::emit(const std::string& layer, OpBody body, double flops, double bytes) {
  ops_->push_back(Op{param(layer), std::move(body), flops, bytes});
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
  op.bias_act = bias_in_act_type(bias);
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

GraphEmitter::Act4 GraphEmitter::conv(const std::string& layer, const Act4& x, const ConvArgs& a) {
  const int pad_end = a.pad_end < 0 ? a.pad : a.pad_end;
  ConvOp op;
  Conv2dParams& p = op.p;
  p.n = batch_;
  p.h = x.h;
  p.w = x.w;
  p.c_in = x.c;
  p.c_out = a.out;
  p.kh = p.kw = a.k;
  p.stride = a.stride;
  p.pad = a.pad;
  p.h_out = conv2d_out_size(x.h, a.k, a.stride, a.pad, pad_end);
  p.w_out = conv2d_out_size(x.w, a.k, a.stride, a.pad, pad_end);
  p.act = a.act;
  p.act_after_residual = a.act_after_residual;
  p.scale_batch_stride = a.scale_batch_stride;
  p.bias_batch_stride = a.bias_batch_stride;
  p.gn_groups = a.gn_groups;
  op.x = x.t;
  op.w = a.w;
  op.scale = a.scale;
  op.bias = a.bias;
  if (a.bias_batch_stride == 0) op.bias_act = bias_in_act_type(a.bias);
  op.residual = a.residual;
  op.gn_stats = a.gn_stats;
  op.gn_gamma = a.gn_gamma;
  op.gn_beta = a.gn_beta;
  op.y = new_act(layer, {batch_, p.h_out, p.w_out, a.out});
  const Act4 y{op.y, p.h_out, p.w_out, a.out};
  const double m = elems(int64_t(batch_) * p.h_out * p.w_out), k = elems(int64_t(a.k) * a.k * x.c);
  const double bytes = act_bytes_ * (elems(int64_t(batch_) * x.h * x.w * x.c) + a.out * k + m * a.out * (a.residual ? 2 : 1));
  emit(layer, std::move(op), 2.0 * m * a.out * k, bytes);
  return y;
}

GroupNormOp GraphEmitter::group_norm_op(const std::string& layer, const Act4& x, int groups, float eps) {
  GroupNormOp op;
  op.p = {nullptr, nullptr, nullptr, nullptr, nullptr, batch_, x.h * x.w, x.c, groups, eps, Activation::None};
  op.x = x.t;
  op.stats = g_.add_tensor(join(tag_, layer + ".stats"), Elem::F32, {batch_, groups, 2});
  return op;
}

Ref GraphEmitter::group_norm_stats(const std::string& layer, const Act4& x, int groups, float eps) {
  GroupNormOp op = group_norm_op(layer, x, groups, eps);
  Ref stats = op.stats;
  emit(layer + ".stats", std::move(op), 0, act_bytes_ * elems(int64_t(batch_) * x.h * x.w * x.c));
  return stats;
}

Ref GraphEmitter::group_norm(const std::string& layer, const Act4& x, int groups, float eps) {
  GroupNormOp op = group_norm_op(layer, x, groups, eps);
  op.y = new_act(layer, {batch_, x.h, x.w, x.c});
  op.gamma = vector(layer + ".weight", x.c);
  op.beta = vector(layer + ".bias", x.c);
  Ref y = op.y;
  emit(layer, std::move(op), 0, 2.0 * act_bytes_ * elems(int64_t(batch_) * x.h * x.w * x.c));
  return y;
}

GraphEmitter::Act4 GraphEmitter::upsample2x(const std::string& layer, const Act4& x) {
  Upsample2xOp op;
  op.p = {nullptr, nullptr, batch_, x.h, x.w, x.c};
  op.x = x.t;
  op.y = new_act(layer, {batch_, 2 * x.h, 2 * x.w, x.c});
  const Act4 y{op.y, 2 * x.h, 2 * x.w, x.c};
  emit(layer, std::move(op), 0, 5.0 * act_bytes_ * elems(int64_t(batch_) * x.h * x.w * x.c));  // reads x, writes 4x
  return y;
}

GraphEmitter::Act4 GraphEmitter::scale_activation(const std::string& layer, const Act4& x, float in_scale,
                                                  float in_shift, Activation act, float out_scale, Ref residual,
                                                  Ref y) {
  const int64_t count = int64_t(batch_) * x.h * x.w * x.c;
  ScaleActivationOp op;
  op.p.count = count;
  op.p.in_scale = in_scale;
  op.p.in_shift = in_shift;
  op.p.act = act;
  op.p.out_scale = out_scale;
  op.x = x.t;
  op.residual = residual;
  op.y = y ? y : new_act(layer, {batch_, x.h, x.w, x.c});
  const Act4 out{op.y, x.h, x.w, x.c};
  emit(layer, std::move(op), 0, (residual ? 3.0 : 2.0) * act_bytes_ * elems(count));
  return out;
}

}  // namespace rtvd
