// What every model builder shares: weights by checkpoint name, and emitters that each allocate an op's
// output tensor and append the op, with its arithmetic work and minimum memory traffic, to the list being
// filled (a graph's setup or frame ops).
#pragma once
#include <string>
#include <vector>

#include "pipeline/graph/graph.h"
#include "pipeline/model_files/weights.h"

namespace rtvd {

class GraphEmitter {
 protected:
  // act_bytes: size of one activation element on the backend (4 CPU, 2 CUDA), for the cost model.
  GraphEmitter(WeightStore& weights, Graph& graph, int act_bytes) : weights_(weights), g_(graph), act_bytes_(act_bytes) {}

  // Weights: a matrix in the activation type, a vector as fp32.
  Ref matrix(const std::string& name, int out, int in);
  Ref vector(const std::string& name, int n);

  Ref new_act(const std::string& name, std::vector<int64_t> shape);
  void emit(const std::string& layer, OpBody body, double flops, double bytes);
  // y (rows, out) = act(x (rows, in) w^T + bias) + residual
  Ref linear(const std::string& layer, Ref x, int rows, int in, int out, Ref w, Ref bias, Ref residual,
             Activation act = Activation::None);
  // Over the last dimension of x (rows, c), with the weights `layer`.weight and `layer`.bias.
  Ref layer_norm(const std::string& layer, Ref x, int rows, int c, float eps = 1e-5f);
  // o (batch * q_len, c) from q (batch * q_len, ...) and k, v (batch * kv_len, ...) at the given token
  // strides, c = heads * head_dim; causal: token i sees keys 0..i only.
  Ref attention(const std::string& layer, Ref q, Ref k, Ref v, int batch, int heads, int q_len, int kv_len, int c,
                int q_stride, int kv_stride, bool causal = false);

  WeightStore& weights_;
  Graph& g_;
  int act_bytes_;
  std::vector<Op>* ops_ = nullptr;  // setup or frame list being filled
  std::string tag_;                 // prefix of the tensor names
};

}  // namespace rtvd
