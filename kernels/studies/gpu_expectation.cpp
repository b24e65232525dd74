#include "kernels/studies/gpu_expectation.h"

#include <cstdio>
#include <map>

#include "kernels/measure/peers.h"

namespace kl::study {
namespace {

// The recorded row `name` of the memory section with the largest GB/s figure of the ladder.
const peers::Row* recorded(const peers::Section* s, const std::string& name) {
  const peers::Row* best = nullptr;
  if (!s) return nullptr;
  for (const peers::Row& r : s->rows)
    if (r.name == name && !r.gbs.empty() && r.gbs[0] && (!best || *r.gbs[0] > *best->gbs[0])) best = &r;
  return best;
}

std::string fmt_gbs(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f GB/s", v);
  return b;
}

std::string fmt_of_copy(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f of a copy", v);
  return b;
}

GpuExpectation expect(const char* what, double slow_bytes, double fast_bytes, const char* row_name,
                      const char* label, const std::map<std::string, std::string>& peer_names) {
  GpuExpectation e;
  e.bytes_ratio = slow_bytes / fast_bytes;
  char b[600];
  std::snprintf(b, sizeof b,
                "CPU timings do not show what a GPU does: on a GPU at large sizes %s are bound by memory bandwidth, "
                "so %.0f bytes per element against %.0f should take about %.2gx less time.",
                what, fast_bytes, slow_bytes, e.bytes_ratio);
  e.sentence = b;
  const peers::Recorded& rec = peers::embedded();
  const peers::Section* mem = rec.find("memory");
  if (const peers::Row* r = recorded(mem, row_name)) {
    e.recorded_gbs = *r->gbs[0];
    e.recorded_of_copy = r->values[0].value_or(0);
    e.recorded_shape = r->shape;
    e.sentence += " Recorded on an " + rec.device + " (" + peers::kSourcePath + ", " + rec.date + "): " + label +
                  " at " + r->shape + ", " + fmt_gbs(e.recorded_gbs) + " (" + fmt_of_copy(e.recorded_of_copy) + ")";
    for (size_t c : mem->peer_columns())
      if (c < r->gbs.size() && r->gbs[c] && peer_names.count(mem->columns[c].id))
        e.sentence += "; " + peer_names.at(mem->columns[c].id) + ", " + fmt_gbs(*r->gbs[c]) + " (" +
                      fmt_of_copy(r->values[c].value_or(0)) + ")";
    e.sentence += ".";
  }
  return e;
}

}  // namespace

GpuExpectation relu_dropout_on_gpu() {
  return expect("fused ReLU + dropout and the unfused pair", kReluDropoutUnfusedBytes, kReluDropoutFusedBytes,
                "ReLU + dropout fused", "the ladder's fused ReLU + dropout",
                {{"triton", "Triton's fused kernel"}, {"torch", "torch's relu then F.dropout (unfused)"}});
}

GpuExpectation softmax_on_gpu() {
  return expect("one-pass and three-pass softmax", kSoftmaxThreePassBytes, kSoftmaxOnePassBytes, "softmax fixed",
                "the ladder's one-pass softmax", {{"triton", "Triton's"}, {"torch", "torch.softmax"}});
}

}  // namespace kl::study
