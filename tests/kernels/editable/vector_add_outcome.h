// One traced vector-add launch for the editable-kernel tests (test_launch, test_nvrtc, test_worker) and the
// rung's own (tests/kernels/rungs/test_vector_add.cpp): x and y uploaded, the output poisoned (0xFF bytes:
// NaN), a fresh element trace, the launch the test chooses (shipped or edited, in process or through the
// worker), and everything copied back to the host.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/editable/launch.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/trace.h"

namespace kl::test {

struct VectorAddOutcome {
  std::vector<float> out;
  std::vector<int32_t> writer;
  std::vector<uint32_t> count;
  std::vector<uint8_t> lanes;
  editable::Fault fault;
};

// Launches out = x + y over n elements with `block` lanes per program, recording into the trace view.
using VectorAddLaunch =
    std::function<editable::Fault(const float* x, const float* y, float* out, int64_t n, int block, ElementTraceView* v)>;

inline VectorAddOutcome traced_vector_add(Backend b, int64_t n, int block, const std::vector<float>& x,
                                          const std::vector<float>& y, const VectorAddLaunch& launch) {
  Buffer<float> dx(b, size_t(n)), dy(b, size_t(n)), dout(b, size_t(n));
  dx.upload(x);
  dy.upload(y);
  dout.fill_bytes(0xFF);
  ElementTrace t;
  t.reset(b, n, block);
  ElementTraceView v = t.view();
  VectorAddOutcome o;
  o.fault = launch(dx.data(), dy.data(), dout.data(), n, block, &v);
  o.out = dout.to_host();
  o.writer = t.writer.to_host();
  o.count = t.write_count.to_host();
  o.lanes = t.lane_state.to_host();
  return o;
}

}  // namespace kl::test
