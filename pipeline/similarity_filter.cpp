#include "pipeline/similarity_filter.h"

#include <algorithm>
#include <string>

namespace rtvd {

double source_similarity(const std::vector<float>& sums, int64_t count) {
  const int chunks = int(sums.size() / 3);
  double total = 0, worst = 0;
  for (int c = 0; c < chunks; ++c) {
    total += double(sums[3 * c]) + sums[3 * c + 1];
    worst = std::max(worst, double(sums[3 * c + 2]));
  }
  if (worst == 0) return 1.0;
  // Chunks of equal size but the last: count / size of them hold the values.
  const int64_t size = (count + chunks - 1) / chunks;
  return 1.0 - double(count) / double(size) * worst / total;
}

void SourceMonitor::add_to(FramePlan& plan, const std::string& name) {
  active_ = false;
  if (!plan.image) return;
  active_ = true;
  Graph& g = plan.graph;
  const TensorInfo& image = g.tensors.at(plan.image.id);
  count_ = image.numel();
  chunks_ = int(std::min<int64_t>(kSimilarityChunks, count_));
  // The kept source in activations: fp16's rounding (at most 2^-12 of a value in [-1, 1]) moves the measure
  // by about 1e-8, far below any threshold that means something.
  const Ref kept = g.add_tensor(name + ".kept_source", Elem::Act, image.shape, true);
  sums_ = g.add_tensor(name + ".sums", Elem::F32, {chunks_, 3}, true);
  SimilarityOp measure;
  measure.p.count = count_;
  measure.p.chunks = chunks_;
  measure.x = plan.image;
  measure.y = kept;
  measure.sums = sums_;
  CastOp keep;
  keep.p.count = count_;
  keep.x = plan.image;
  keep.y = kept;
  measure_op_ = g.check.size();
  g.check.push_back(Op{name + ".measure", measure, 0, double(count_) * 6});
  g.check.push_back(Op{name + ".keep", keep, 0, double(count_) * 6});
}

double SourceMonitor::similarity(Backend& backend) {
  backend.run_check(measure_op_);
  host_sums_.resize(size_t(chunks_) * 3);
  backend.read(sums_, host_sums_.data(), host_sums_.size());
  return source_similarity(host_sums_, count_);
}

void SourceMonitor::keep(Backend& backend) {
  backend.run_check(measure_op_ + 1);
}

void SimilarityFilter::add_to(FramePlan& plan, float threshold) {
  threshold_ = 0;
  processed_ = -1;
  last_.clear();
  if (threshold <= 0 || !plan.image) return;
  threshold_ = threshold;
  last_.add_to(plan, "similarity");
}

bool SimilarityFilter::skip(Backend& backend, int64_t frame, bool may_skip) {
  skipped_ = false;
  if (threshold_ <= 0) return false;
  if (may_skip && processed_ >= 0 && frame == processed_ + 1) skipped_ = last_.similarity(backend) >= threshold_;
  if (skipped_) {
    ++skipped_frames_;
    return true;
  }
  last_.keep(backend);
  processed_ = frame;
  return false;
}

}  // namespace rtvd
