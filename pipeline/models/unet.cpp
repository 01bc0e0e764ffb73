#include "pipeline/models/unet.h"

#include <cmath>
#include <span>
#include <tuple>

#include "base/error.h"

namespace rtvd {

namespace {

std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }
double elems(int64_t a) { return static_cast<double>(a); }

}  // namespace

UNetBuilder::UNetBuilder(const ModelConfig& cfg, WeightStore& weights, Graph& graph, int batch, int act_bytes,
                         bool encoder_only)
    : GraphEmitter(weights, graph, act_bytes), cfg_(cfg), encoder_only_(encoder_only) {
  batch_ = batch;
}

// ---- weights ----

int UNetBuilder::resnet_proj_width(int out) const { return cfg_.norm == NormKind::Batch ? 2 * out : out; }

// All ResNets' time_emb_proj stacked into one (sum of widths, T) matrix: one linear per step for all FiLM.
Ref UNetBuilder::time_projection_weight() {
  return weights_.get(param("time_emb_proj.all.weight"), Elem::Act, [&] {
    const int T = cfg_.time_embed_dim();
    WeightTensor t = WeightTensor::stacked({0, T}, {});
    for (const auto& [prefix, out] : unet_resnets(cfg_, encoder_only_)) {
      const int width = resnet_proj_width(out);
      t.parts.push_back(weights_.view(param(prefix + ".time_emb_proj.weight"), {width, T}));
      t.shape[0] += width;
    }
    return t;
  });
}

Ref UNetBuilder::time_projection_bias() {
  return weights_.get(param("time_emb_proj.all.bias"), Elem::F32, [&] {
    WeightTensor t = WeightTensor::floats({0}, {});
    for (const auto& [prefix, out] : unet_resnets(cfg_, encoder_only_)) {
      const int width = resnet_proj_width(out);
      auto b = weights_.read(param(prefix + ".time_emb_proj.bias"), {width});
      t.values.insert(t.values.end(), b.begin(), b.end());
      t.shape[0] += width;
    }
    return t;
  });
}

// Eval-mode BatchNorm as y = x * scale + shift: scale = gamma / sqrt(var + eps), shift = beta - mean * scale.
std::pair<Ref, Ref> UNetBuilder::folded_batch_norm(const std::string& prefix, int c) {
  constexpr float kBatchNormEps = 1e-5f;
  std::vector<float> scale, shift;
  auto make = [&] {
    if (scale.empty()) {
      const auto gamma = weights_.read(param(prefix + ".weight"), {c});
      const auto beta = weights_.read(param(prefix + ".bias"), {c});
      const auto mean = weights_.read(param(prefix + ".running_mean"), {c});
      const auto var = weights_.read(param(prefix + ".running_var"), {c});
      scale.resize(c);
      shift.resize(c);
      for (int i = 0; i < c; ++i) {
        scale[i] = gamma[i] / std::sqrt(var[i] + kBatchNormEps);
        shift[i] = beta[i] - mean[i] * scale[i];
      }
    }
  };
  Ref s = weights_.get(param(prefix + ".folded_scale"), Elem::F32, [&] { make(); return WeightTensor::floats({c}, scale); });
  Ref b = weights_.get(param(prefix + ".folded_shift"), Elem::F32, [&] { make(); return WeightTensor::floats({c}, shift); });
  return {s, b};
}

// ---- op emitters ----

Ref UNetBuilder::attention(const std::string& layer, Ref q, Ref k, Ref v, int q_len, int kv_len, int c, int q_stride,
                           int kv_stride) {
  return GraphEmitter::attention(layer, q, k, v, batch_, cfg_.heads_for(c), q_len, kv_len, c, q_stride, kv_stride);
}

// ---- conditioning (setup ops) ----

// Shapes: n = batch, c0 = block_out_channels[0], T = time_embed_dim() = 4 c0.
StepConditioning UNetBuilder::conditioning(const std::vector<double>& t, Ref class_ids, const std::string& tag,
                                           Ref added) {
  ops_ = &g_.setup;
  tag_ = tag;
  const int C0 = cfg_.block_out_channels[0], T = cfg_.time_embed_dim(), groups = int(t.size());
  if (groups < 1 || batch_ % groups) fail("internal: ", groups, " timestep groups in a batch of ", batch_);
  if (bool(added) != cfg_.text_time()) fail("internal: the added embedding of ", cfg_.name, " is ", added ? "" : "not ", "given");
  const int rows = batch_ / groups;

  const Ref temb = new_act("time_proj", {batch_, C0});
  for (int g = 0; g < groups; ++g) {
    TimestepEmbeddingOp te;
    te.p = {.n = rows, .dim = C0, .timestep = float(t[g] * cfg_.timestep_scale), .flip_sin_to_cos = cfg_.flip_sin_to_cos,
            .freq_shift = cfg_.freq_shift};
    te.y = temb.at(int64_t(g) * rows * C0);
    emit(groups == 1 ? "time_proj" : cat("time_proj.", g), std::move(te), 0, 0);  // (n / groups, c0) sinusoidal
  }

  Ref e1 = linear("time_embedding.linear_1", temb, batch_, C0, T, matrix("time_embedding.linear_1.weight", T, C0),
                  vector("time_embedding.linear_1.bias", T), {}, Activation::Silu);  // (n, T)
  Ref class_emb = added;  // diffusers adds the class embedding or the added one (configs have at most one)
  if (cfg_.num_class_embeds > 0) {
    if (added) fail("internal: ", cfg_.name, " has classes and an added embedding");
    EmbeddingOp eo;
    eo.p.n = batch_;
    eo.p.rows = cfg_.num_class_embeds;
    eo.p.dim = T;
    eo.table = matrix("class_embedding.weight", cfg_.num_class_embeds, T);
    eo.ids = class_ids;
    eo.y = new_act("class_embedding", {batch_, T});
    class_emb = eo.y;
    emit("class_embedding", std::move(eo), 0, 0);  // (n, T)
  }
  Ref emb = linear("time_embedding.linear_2", e1, batch_, T, T, matrix("time_embedding.linear_2.weight", T, T),
                   vector("time_embedding.linear_2.bias", T), class_emb);  // (n, T) emb = time + class
  SiluOp so;
  so.p.count = int64_t(batch_) * T;
  so.x = emb;
  so.y = new_act("time_embedding.silu", {batch_, T});
  Ref semb = so.y;
  emit("time_embedding.silu", std::move(so), 0, 0);  // (n, T)

  const auto resnets = unet_resnets(cfg_, encoder_only_);
  int total = 0;
  for (const auto& r : resnets) total += resnet_proj_width(r.second);
  // Every ResNet's time_emb_proj in one linear: (n, total), total = the sum of c (group norm) or 2c (batch norm).
  Ref proj = linear("time_emb_proj.all", semb, batch_, T, total, time_projection_weight(), time_projection_bias(), {});

  StepConditioning cond;
  int offset = 0;
  for (const auto& [prefix, out] : resnets) {
    FilmOp fo;
    fo.p.proj_stride = total;
    fo.p.proj_offset = offset;
    fo.p.n = batch_;
    fo.p.c = out;
    fo.p.with_scale = cfg_.norm == NormKind::Batch;
    fo.proj = proj;
    if (fo.p.with_scale) {
      std::tie(fo.base_scale, fo.base_bias) = folded_batch_norm(prefix + ".norm1", out);
      fo.scale = g_.add_tensor(join(tag, prefix + ".film_scale"), Elem::F32, {batch_, out}, true);
    } else {
      fo.base_bias = vector(prefix + ".conv1.bias", out);
    }
    fo.bias = g_.add_tensor(join(tag, prefix + ".film_bias"), Elem::F32, {batch_, out}, true);
    cond.film[prefix] = {fo.scale, fo.bias};
    emit(prefix + ".film", std::move(fo), 0, 0);  // scale and bias (n, c), c = the ResNet's out channels
    offset += resnet_proj_width(out);
  }
  return cond;
}

// Shapes: n = batch, A = addition_time_embed_dim, P = projection_class_embeddings_input_dim = text_embeds_dim()
// + 6 A, T = time_embed_dim().
Ref UNetBuilder::added_embedding(Ref text_embeds, Ref time_ids) {
  ops_ = &g_.setup;
  tag_ = "added";
  const int A = cfg_.addition_time_embed_dim, P = cfg_.projection_class_embeddings_input_dim, T = cfg_.time_embed_dim();
  const int ids = batch_ * ModelConfig::kTimeIds, text = cfg_.text_embeds_dim();
  TimestepEmbeddingOp te;
  te.p = {.n = ids, .dim = A, .flip_sin_to_cos = cfg_.flip_sin_to_cos, .freq_shift = cfg_.freq_shift};
  te.timesteps = time_ids;
  te.y = new_act("add_time_proj", {batch_, ModelConfig::kTimeIds * A});
  Ref time_embeds = te.y;
  emit("add_time_proj", std::move(te), 0, 0);  // (n*6, A) = (n, 6A): each id's own sinusoidal embedding

  ConcatOp co;
  co.p.pixels = batch_;
  co.p.ca = text;
  co.p.cb = ModelConfig::kTimeIds * A;
  co.a = text_embeds;
  co.b = time_embeds;
  co.y = new_act("add_embeds", {batch_, P});
  Ref add_embeds = co.y;
  emit("add_embeds", std::move(co), 0, 2.0 * act_bytes_ * elems(int64_t(batch_) * P));  // (n, P) [text | time ids]

  Ref e1 = linear("add_embedding.linear_1", add_embeds, batch_, P, T, matrix("add_embedding.linear_1.weight", T, P),
                  vector("add_embedding.linear_1.bias", T), {}, Activation::Silu);  // (n, T)
  Ref aug = linear("add_embedding.linear_2", e1, batch_, T, T, matrix("add_embedding.linear_2.weight", T, T),
                   vector("add_embedding.linear_2.bias", T), {});  // (n, T)
  g_.tensors[aug.id].persistent = true;  // read by every step's conditioning, which may run later
  return aug;
}

CrossContext UNetBuilder::cross_context(Ref context) {
  ops_ = &g_.setup;
  tag_ = "context";
  CrossContext cross;
  if (cfg_.cross_attention_dim == 0) return cross;
  const int L = cfg_.levels(), D = cfg_.cross_attention_dim, rows = batch_ * cfg_.context_length;
  auto add_block = [&](const std::string& attn_prefix, int level) {
    const int c = cfg_.block_out_channels[level];
    for (int k = 0; k < cfg_.transformer_depth(level); ++k) {
      const std::string p = cat(attn_prefix, ".transformer_blocks.", k, ".attn2");
      Ref w = weights_.get(param(p + ".to_kv.weight"), Elem::Act, [&] {
        return WeightTensor::stacked({2 * c, D}, {weights_.view(param(p + ".to_k.weight"), {c, D}),
                                                  weights_.view(param(p + ".to_v.weight"), {c, D})});
      });
      Ref kv = linear(p + ".to_kv", context, rows, D, 2 * c, w, {}, {});  // (n*S, 2c): K | V, S = context_length
      g_.tensors[kv.id].persistent = true;
      cross.kv[p] = kv;
    }
  };
  for (int i = 0; i < L; ++i)
    if (cfg_.attention_levels[i])
      for (int j = 0; j < cfg_.layers_per_block; ++j) add_block(cat("down_blocks.", i, ".attentions.", j), i);
  if (cfg_.mid_attention) add_block("mid_block.attentions.0", L - 1);
  if (encoder_only_) return cross;
  for (int i = 0; i < L; ++i)
    if (cfg_.attention_levels[L - 1 - i])
      for (int j = 0; j <= cfg_.layers_per_block; ++j) add_block(cat("up_blocks.", i, ".attentions.", j), L - 1 - i);
  return cross;
}

// ---- blocks (frame ops) ----
// Shape comments are NHWC: n = batch (2 with guidance: cond | uncond), h x w = the block's input at its
// level, c = its channels; token tensors are (n*h*w, c). For SD 2.1 at 512x512: n 2, 64x64 latents at the
// top level, c 320/640/1280/1280.

// diffusers' ResnetBlock2D: x (n, h, w, c_in) -> (n, h, w, out).

UNetBuilder::Act4 UNetBuilder::resnet(const std::string& prefix, const Act4& x, int out, const StepConditioning& cond) {
  const auto film = cond.film.find(prefix);
  if (film == cond.film.end()) fail("internal: no conditioning for ", prefix);
  Ref shortcut = x.t;
  if (x.c != out) {
    ConvArgs sc;
    sc.w = conv_weight(prefix + ".conv_shortcut.weight", out, x.c, 1);
    sc.bias = vector(prefix + ".conv_shortcut.bias", out);
    sc.out = out;
    sc.k = 1;
    sc.pad = 0;
    shortcut = conv(prefix + ".conv_shortcut", x, sc).t;  // (n, h, w, out)
  }
  if (cfg_.norm == NormKind::Batch) {
    // h = silu(bn1(conv1 x) (1 + g) + b); out = silu(bn2(conv2 h)) + shortcut
    ConvArgs c1;
    c1.w = conv_weight(prefix + ".conv1.weight", out, x.c, 3);
    c1.scale = film->second.first;
    c1.bias = film->second.second;
    c1.scale_batch_stride = c1.bias_batch_stride = out;
    c1.out = out;
    c1.act = Activation::Silu;
    const Act4 h = conv(prefix + ".conv1", x, c1);  // (n, h, w, out)
    ConvArgs c2;
    c2.w = conv_weight(prefix + ".conv2.weight", out, out, 3);
    std::tie(c2.scale, c2.bias) = folded_batch_norm(prefix + ".norm2", out);
    c2.out = out;
    c2.act = Activation::Silu;
    c2.residual = shortcut;
    return conv(prefix + ".conv2", h, c2);  // (n, h, w, out)
  }
  // h = conv1(silu(norm1 x)) + temb; out = shortcut + conv2(silu(norm2 h))
  ConvArgs c1;
  c1.w = conv_weight(prefix + ".conv1.weight", out, x.c, 3);
  c1.bias = film->second.second;
  c1.bias_batch_stride = out;
  c1.out = out;
  c1.gn_stats = group_norm_stats(prefix + ".norm1", x, cfg_.norm_num_groups, cfg_.norm_eps);  // (n, groups, 2)
  c1.gn_gamma = vector(prefix + ".norm1.weight", x.c);
  c1.gn_beta = vector(prefix + ".norm1.bias", x.c);
  c1.gn_groups = cfg_.norm_num_groups;
  const Act4 h = conv(prefix + ".conv1", x, c1);  // (n, h, w, out): silu(norm1 x) on the way in
  ConvArgs c2;
  c2.w = conv_weight(prefix + ".conv2.weight", out, out, 3);
  c2.bias = vector(prefix + ".conv2.bias", out);
  c2.out = out;
  c2.gn_stats = group_norm_stats(prefix + ".norm2", h, cfg_.norm_num_groups, cfg_.norm_eps);  // (n, groups, 2)
  c2.gn_gamma = vector(prefix + ".norm2.weight", out);
  c2.gn_beta = vector(prefix + ".norm2.bias", out);
  c2.gn_groups = cfg_.norm_num_groups;
  c2.residual = shortcut;
  return conv(prefix + ".conv2", h, c2);  // (n, h, w, out)
}

// diffusers' Transformer2DModel with its BasicTransformerBlocks: x (n, h, w, c) -> (n, h, w, c).
UNetBuilder::Act4 UNetBuilder::transformer(const std::string& prefix, const Act4& x, int depth,
                                           const CrossContext& cross) {
  const int C = x.c, rows = batch_ * x.h * x.w, seq = x.h * x.w;
  // Projections are Linear (SD 2.1) or 1x1 conv (SD 1.5): the same matrix on NHWC tokens.
  auto projection = [&](const std::string& name) {
    if (cfg_.use_linear_projection) return matrix(name + ".weight", C, C);
    return weights_.get(param(name + ".weight"), Elem::Act, [&] {
      return WeightTensor::stacked({C, C}, {weights_.view(param(name + ".weight"), {C, C, 1, 1})});
    });
  };

  Ref normed = group_norm(prefix + ".norm", x, cfg_.norm_num_groups, 1e-6f);  // (n, h, w, c)

  Ref h = linear(prefix + ".proj_in", normed, rows, C, C, projection(prefix + ".proj_in"),
                 vector(prefix + ".proj_in.bias", C), {});  // (n*h*w, c)
  for (int k = 0; k < depth; ++k) {
    const std::string b = cat(prefix, ".transformer_blocks.", k);
    // self-attention: one fused QKV projection, read in place by the attention op
    Ref n1 = layer_norm(b + ".norm1", h, rows, C);  // (n*h*w, c)
    Ref wqkv = weights_.get(param(b + ".attn1.to_qkv.weight"), Elem::Act, [&] {
      WeightTensor t = WeightTensor::stacked({3 * C, C}, {});
      for (const char* name : {".attn1.to_q.weight", ".attn1.to_k.weight", ".attn1.to_v.weight"})
        t.parts.push_back(weights_.view(param(b + name), {C, C}));
      return t;
    });
    Ref qkv = linear(b + ".attn1.to_qkv", n1, rows, C, 3 * C, wqkv, {}, {});  // (n*h*w, 3c): Q | K | V
    Ref a1 = attention(b + ".attn1", qkv, qkv.at(C), qkv.at(2 * C), seq, seq, C, 3 * C, 3 * C);  // (n*h*w, c)
    h = linear(b + ".attn1.to_out.0", a1, rows, C, C, matrix(b + ".attn1.to_out.0.weight", C, C),
               vector(b + ".attn1.to_out.0.bias", C), h);  // (n*h*w, c) + h
    if (cfg_.cross_attention_dim > 0) {
      const auto kv = cross.kv.find(b + ".attn2");
      if (kv == cross.kv.end()) fail("internal: no context K/V for ", b);
      Ref n2 = layer_norm(b + ".norm2", h, rows, C);  // (n*h*w, c)
      Ref q = linear(b + ".attn2.to_q", n2, rows, C, C, matrix(b + ".attn2.to_q.weight", C, C), {}, {});  // (n*h*w, c)
      // K, V: (n*S, 2c) from cross_context(), S = context_length
      Ref a2 = attention(b + ".attn2", q, kv->second, kv->second.at(C), seq, cfg_.context_length, C, C, 2 * C);  // (n*h*w, c)
      h = linear(b + ".attn2.to_out.0", a2, rows, C, C, matrix(b + ".attn2.to_out.0.weight", C, C),
                 vector(b + ".attn2.to_out.0.bias", C), h);  // (n*h*w, c) + h
    }
    Ref n3 = layer_norm(b + ".norm3", h, rows, C);  // (n*h*w, c)
    Ref ff = linear(b + ".ff.net.0.proj", n3, rows, C, 8 * C, matrix(b + ".ff.net.0.proj.weight", 8 * C, C),
                    vector(b + ".ff.net.0.proj.bias", 8 * C), {});  // (n*h*w, 8c): value | gate
    GegluOp ge;
    ge.p.rows = rows;
    ge.p.f = 4 * C;
    ge.x = ff;
    ge.y = new_act(b + ".ff.net.0", {rows, 4 * C});
    Ref gated = ge.y;
    emit(b + ".ff.net.0", std::move(ge), 0, 12.0 * act_bytes_ * rows * elems(C));  // (n*h*w, 4c) GEGLU
    h = linear(b + ".ff.net.2", gated, rows, 4 * C, C, matrix(b + ".ff.net.2.weight", C, 4 * C),
               vector(b + ".ff.net.2.bias", C), h);  // (n*h*w, c) + h
  }
  Ref out = linear(prefix + ".proj_out", h, rows, C, C, projection(prefix + ".proj_out"),
                   vector(prefix + ".proj_out.bias", C), x.t);  // (n, h, w, c) + x
  return {out, x.h, x.w, C};
}

// diffusers' UNet2DConditionModel.forward: x (n, h, w, in_channels) -> velocity (n, h, w, out_channels).
// Level l (0 at the top) works at (h/2^l, w/2^l) with c_l = block_out_channels[l] channels; L levels.
Ref UNetBuilder::forward(Ref x_in, int h, int w, const StepConditioning& cond, const CrossContext& cross,
                         const std::string& tag, Ref* deep, std::span<const ControlResiduals> residuals) {
  ops_ = &g_.frame;
  tag_ = tag;
  const int L = cfg_.levels();

  Act4 x = input(x_in, h, w);  // (n, h, w, c0)
  std::vector<Act4> skips{x};  // diffusers' down_block_res_samples
  x = encode(x, skips, cond, cross);  // (n, h/2^(L-1), w/2^(L-1), c_(L-1))
  // The down path has read the skips as they were: the up blocks read them with the residuals added.
  add_residuals(residuals, skips, &x);

  for (int i = 0; i < L; ++i) {
    if (i == L - 1 && deep) *deep = x.t;  // (n, h, w, c1): what forward_cached() takes in its place
    x = up_level(i, x, skips, cond, cross);
  }
  return output(x);  // (n, h, w, out_channels)
}

// Shapes as forward()'s.
UNetBuilder::Act4 UNetBuilder::encode(Act4 x, std::vector<Act4>& skips, const StepConditioning& cond,
                                      const CrossContext& cross) {
  const int L = cfg_.levels();
  const auto& ch = cfg_.block_out_channels;
  // down_blocks.i: level i.
  for (int i = 0; i < L; ++i) {
    x = down_level(i, x, skips, cond, cross);
    if (i < L - 1) {
      const std::string p = cat("down_blocks.", i, ".downsamplers.0.conv");
      ConvArgs d;
      d.w = conv_weight(p + ".weight", ch[i], ch[i], 3);
      d.bias = vector(p + ".bias", ch[i]);
      d.out = ch[i];
      d.stride = 2;
      x = conv(p, x, d);  // (n, h/2^(i+1), w/2^(i+1), c_i)
      skips.push_back(x);
    }
  }

  // mid_block: the bottom level, l = L-1.
  x = resnet("mid_block.resnets.0", x, ch[L - 1], cond);                      // (n, h/2^l, w/2^l, c_l)
  if (cfg_.mid_attention) x = transformer("mid_block.attentions.0", x, cfg_.transformer_depth(L - 1), cross);  // (n, h/2^l, w/2^l, c_l)
  return resnet("mid_block.resnets.1", x, ch[L - 1], cond);                   // (n, h/2^l, w/2^l, c_l)
}

// DeepCache's shallow pass: the top level's blocks alone, the deeper ones' contribution read from `deep`.
Ref UNetBuilder::forward_cached(Ref x_in, Ref deep, int h, int w, const StepConditioning& cond,
                                const CrossContext& cross, const std::string& tag,
                                std::span<const ControlResiduals> residuals) {
  ops_ = &g_.cached_frame;
  tag_ = tag;
  const int L = cfg_.levels();
  if (L < 2) fail("internal: a feature cache needs a U-Net of 2 levels or more, this one has ", L);
  Act4 x = input(x_in, h, w);  // (n, h, w, c0)
  std::vector<Act4> skips{x};
  down_level(0, x, skips, cond, cross);  // the top level's skips; down_blocks.0's downsampler feeds only deeper levels
  add_residuals(residuals, skips, nullptr);
  // (n, h, w, c1): up_blocks.(L-2)'s output, upsampled to the top level, as the last full forward left it
  return output(up_level(L - 1, {deep, h, w, cfg_.block_out_channels[1]}, skips, cond, cross));  // (n, h, w, out_channels)
}

void UNetBuilder::add_residuals(std::span<const ControlResiduals> residuals, const std::vector<Act4>& skips,
                                const Act4* mid) {
  residual_adds_.clear();
  for (size_t k = 0; k < residuals.size(); ++k) {
    const ControlResiduals& r = residuals[k];
    if (r.down.size() != skips.size() || bool(r.mid) != bool(mid))
      fail("internal: ControlNet residuals for ", r.down.size(), " skips", r.mid ? " and the mid block" : "", ", the ",
           "U-Net pass has ", skips.size(), mid ? " and the mid block" : "");
    const std::string net = k ? cat(".net", k) : "";  // "down_residual.3.net1": the second residuals' given
    const size_t begin = ops_->size();
    for (size_t i = 0; i < skips.size(); ++i)
      add_in_place(cat("down_residual.", i, net), skips[i], r.down[i]);  // (n, h_i, w_i, c_i) skip += residual
    if (mid) add_in_place("mid_residual" + net, *mid, r.mid);  // (n, h/2^(L-1), w/2^(L-1), c_(L-1)) mid += residual
    residual_adds_.push_back({begin, ops_->size()});
  }
}

// conv_in: x (n, h, w, in_channels) -> (n, h, w, c0) (+ residual).
UNetBuilder::Act4 UNetBuilder::input(Ref x_in, int h, int w, Ref residual) {
  const int c0 = cfg_.block_out_channels[0];
  ConvArgs ci = conv_args("conv_in", c0, cfg_.in_channels, 3);
  ci.residual = residual;
  return conv("conv_in", {x_in, h, w, cfg_.in_channels}, ci);  // (n, h, w, c0)
}

// down_blocks.i's ResNets and attentions (not its downsampler), each output pushed onto skips.
UNetBuilder::Act4 UNetBuilder::down_level(int i, Act4 x, std::vector<Act4>& skips, const StepConditioning& cond,
                                          const CrossContext& cross) {
  for (int j = 0; j < cfg_.layers_per_block; ++j) {
    x = resnet(cat("down_blocks.", i, ".resnets.", j), x, cfg_.block_out_channels[i], cond);  // (n, h/2^i, w/2^i, c_i)
    if (cfg_.attention_levels[i])
      x = transformer(cat("down_blocks.", i, ".attentions.", j), x, cfg_.transformer_depth(i), cross);  // (n, h/2^i, w/2^i, c_i)
    skips.push_back(x);
  }
  return x;
}

// up_blocks.i: level l = L-1-i, each ResNet fed the concat of x and the last skip (popped), then the
// upsampler below the top level.
UNetBuilder::Act4 UNetBuilder::up_level(int i, Act4 x, std::vector<Act4>& skips, const StepConditioning& cond,
                                        const CrossContext& cross) {
  const int L = cfg_.levels(), level = L - 1 - i, out = cfg_.block_out_channels[level];
  for (int j = 0; j <= cfg_.layers_per_block; ++j) {
    const Act4 skip = skips.back();
    skips.pop_back();
    const std::string name = cat("up_blocks.", i, ".resnets.", j);
    ConcatOp co;
    co.p.pixels = int64_t(batch_) * x.h * x.w;
    co.p.ca = x.c;
    co.p.cb = skip.c;
    co.a = x.t;
    co.b = skip.t;
    co.y = new_act(name + ".concat", {batch_, x.h, x.w, x.c + skip.c});
    const Act4 joined{co.y, x.h, x.w, x.c + skip.c};
    // (n, h/2^l, w/2^l, x.c + skip.c)
    emit(name + ".concat", std::move(co), 0, 2.0 * act_bytes_ * elems(int64_t(batch_) * x.h * x.w * joined.c));
    x = resnet(name, joined, out, cond);  // (n, h/2^l, w/2^l, c_l)
    if (cfg_.attention_levels[level])
      x = transformer(cat("up_blocks.", i, ".attentions.", j), x, cfg_.transformer_depth(level), cross);  // (n, h/2^l, w/2^l, c_l)
  }
  if (i == L - 1) return x;
  const std::string p = cat("up_blocks.", i, ".upsamplers.0");
  const Act4 up = upsample2x(p + ".upsample", x);  // (n, h/2^(l-1), w/2^(l-1), c_l), nearest
  ConvArgs u;
  u.w = conv_weight(p + ".conv.weight", out, out, 3);
  u.bias = vector(p + ".conv.bias", out);
  u.out = out;
  return conv(p + ".conv", up, u);  // (n, h/2^(l-1), w/2^(l-1), c_l)
}

// conv_out (after silu(conv_norm_out x) for group norm models): x (n, h, w, c0) -> (n, h, w, out_channels).
Ref UNetBuilder::output(const Act4& x) {
  const int c0 = cfg_.block_out_channels[0];
  ConvArgs co;
  co.w = conv_weight("conv_out.weight", cfg_.out_channels, c0, 3);
  co.bias = vector("conv_out.bias", cfg_.out_channels);
  co.out = cfg_.out_channels;
  if (cfg_.norm == NormKind::Group) {
    co.gn_stats = group_norm_stats("conv_norm_out", x, cfg_.norm_num_groups, cfg_.norm_eps);  // (n, groups, 2)
    co.gn_gamma = vector("conv_norm_out.weight", c0);
    co.gn_beta = vector("conv_norm_out.bias", c0);
    co.gn_groups = cfg_.norm_num_groups;
  }
  return conv("conv_out", x, co).t;  // (n, h, w, out_channels); group norm: of silu(conv_norm_out x)
}

}  // namespace rtvd
