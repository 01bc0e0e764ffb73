// What every model builder shares: weights by checkpoint name, and emitters that each allocate an op's
// output tensor and append the op, with its arithmetic work and minimum memory traffic, to the list being
// filled (a graph's setup or frame ops). The convolutional ones (conv, the GroupNorms) work on NHWC
// activations of batch_ images.
#pragma once
#include <string>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/graph/weights.h"

namespace rtvd {

class GraphEmitter {
 protected:
  // act_bytes: size of one activation element on the backend (4 CPU, 2 CUDA), for the cost model.
  GraphEmitter(WeightStore& weights, Graph& graph, int act_bytes) : weights_(weights), g_(graph), act_bytes_(act_bytes) {}

  // An activation tensor with its NHWC extent (batch_ images).
  struct Act4 {
    Ref t;
    int h, w, c;
  };
  // A conv's weights and what it fuses (conv2d.h): act(conv(pre(x)) * scale + bias) + residual, or
  // act(... + residual) with act_after_residual; pre(x) = silu(GroupNorm(x)) with gn_stats.
  struct ConvArgs {
    Ref w, scale, bias, residual, gn_stats, gn_gamma, gn_beta;
    int scale_batch_stride = 0, bias_batch_stride = 0, gn_groups = 0;
    int out = 0, k = 3, stride = 1, pad = 1;
    int pad_end = -1;  // zeros after the input: -1 = pad; pad + 1 for diffusers' Downsample2D
    Activation act = Activation::None;
    bool act_after_residual = false;
  };

  // A weight's name in the store: weight_prefix_ + name (every weight below is asked for so).
  std::string param(const std::string& name) const { return weight_prefix_ + name; }
  // Weights: a matrix in the activation type, a vector as fp32, a conv weight (out, in, k, k) of the
  // checkpoint in the engine's OHWI layout.
  Ref matrix(const std::string& name, int out, int in);
  Ref vector(const std::string& name, int n);
  Ref conv_weight(const std::string& name, int out, int in, int k);
  // n copies of value, as an fp32 vector weight (an epilogue's constant scale).
  Ref constant(const std::string& name, int n, float value);
  // The k x k conv `name` (its weight, and its bias where it has one): stride 1, as many zeros around the
  // input as keep its size (k / 2), nothing else fused yet.
  ConvArgs conv_args(const std::string& name, int out, int in, int k, bool with_bias = true);

  // An activation named tag_.weight_prefix_ name, and an op of layer weight_prefix_ layer.
  Ref new_act(const std::string& name, std::vector<int64_t> shape);
  void emit(const std::string& layer, OpBody body, double flops, double bytes);
  // y (rows, out) = act(x (rows, in) w^T + bias) + residual
  Ref linear(const std::string& layer, Ref x, int rows, int in, int out, Ref w, Ref bias, Ref residual,
             Activation act = Activation::None);
  // A per-channel weight (vector()) again in the activation type where that is fp16, for LinearParams::bias_act
  // and Conv2dParams::bias_act; none for fp32 activations or anything else.
  Ref bias_in_act_type(Ref bias);
  // Over the last dimension of x (rows, c), with the weights `layer`.weight and `layer`.bias.
  Ref layer_norm(const std::string& layer, Ref x, int rows, int c, float eps = 1e-5f);
  Act4 conv(const std::string& layer, const Act4& x, const ConvArgs& a);
  // The statistics (batch_, groups, 2), mean and rstd, of x's groups: a conv's GroupNorm+SiLU prologue.
  Ref group_norm_stats(const std::string& layer, const Act4& x, int groups, float eps);
  // GroupNorm of x with the weights `layer`.weight and `layer`.bias, no activation: (batch_, h, w, c).
  Ref group_norm(const std::string& layer, const Act4& x, int groups, float eps);
  // Their shared start: the op over x with its statistics tensor.
  GroupNormOp group_norm_op(const std::string& layer, const Act4& x, int groups, float eps);
  // Nearest-neighbour 2x: (batch_, 2h, 2w, c).
  Act4 upsample2x(const std::string& layer, const Act4& x);
  // out_scale * act(in_scale * x + in_shift) (+ residual of x's extent), element by element, into y (x's extent;
  // x itself: in place), or a new tensor of x's extent.
  Act4 scale_activation(const std::string& layer, const Act4& x, float in_scale, float in_shift, Activation act,
                        float out_scale, Ref residual = {}, Ref y = {});
  // x += residual (of x's extent), in place.
  void add_in_place(const std::string& layer, const Act4& x, Ref residual) {
    scale_activation(layer, x, 1.0f, 0.0f, Activation::None, 1.0f, residual, x.t);
  }
  // o (batch * q_len, c) from q (batch * q_len, ...) and k, v (batch * kv_len, ...) at the given token
  // strides, c = heads * head_dim; causal: token i sees keys 0..i only.
  Ref attention(const std::string& layer, Ref q, Ref k, Ref v, int batch, int heads, int q_len, int kv_len, int c,
                int q_stride, int kv_stride, bool causal = false);

  WeightStore& weights_;
  Graph& g_;
  int act_bytes_;
  std::vector<Op>* ops_ = nullptr;  // setup or frame list being filled
  std::string tag_;                 // prefix of the tensor names
  int batch_ = 1;                   // images of the activations conv() and the GroupNorms see
  std::string weight_prefix_;       // of the model's names in a store shared with others ("controlnet.0.")
};

}  // namespace rtvd
