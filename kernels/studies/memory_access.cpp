// Sectors per request on every rung: each rung's traced launch, built by the rung's own launch function,
// run for program 0 with access logs on its main tensors, and the logs summed.
#include "kernels/studies/memory_access.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include "kernels/editable/launch.h"
#include "kernels/rungs/attention.h"
#include "kernels/rungs/flash_attention.h"
#include "kernels/rungs/flash_attention_backward.h"
#include "kernels/rungs/flash_attention_backward_fast.h"
#include "kernels/rungs/relu_dropout.h"
#include "kernels/rungs/softmax.h"
#include "kernels/rungs/vector_add.h"
#include "kernels/runtime/buffer.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/trace.h"
#include "kernels/runtime/warp_access.h"

namespace kl::study::memory_access {
namespace {

namespace wa = warp_access;

std::string printf_text(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string printf_text(const char* f, ...) {
  char buf[512];
  va_list a;
  va_start(a, f);
  std::vsnprintf(buf, sizeof buf, f, a);
  va_end(a);
  return buf;
}

std::string figure(double v) {
  const double r = double(int64_t(v * 10.0 + 0.5)) / 10.0;
  return r == double(int64_t(r)) ? printf_text("%.0f", r) : printf_text("%.1f", r);
}

// Inputs and outputs for one launch: buffers where the backend runs, filled with small values (the
// addresses a kernel uses do not depend on them).
struct Buffers {
  Backend b;
  std::vector<std::unique_ptr<Buffer<float>>> held;
  explicit Buffers(Backend be) : b(be) {}
  float* make(int64_t n) {
    held.push_back(std::make_unique<Buffer<float>>(b, size_t(std::max<int64_t>(n, 1))));
    std::vector<float> v(size_t(std::max<int64_t>(n, 1)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 7) - 3) * 0.125f;
    held.back()->upload(v);
    return held.back()->data();
  }
};

// Attaches a log recording program 0 to each named tensor argument, runs the launch, sums the logs.
void run_logged(Summary& s, Backend b, editable::Launch l, const std::vector<std::string>& watch) {
  const int64_t threads = int64_t(l.block.x) * l.block.y * l.block.z;
  std::map<std::string, std::unique_ptr<AccessLog>> logs;
  for (editable::Arg& a : l.args) {
    if (!a.is_tensor || !a.tensor.data || std::find(watch.begin(), watch.end(), a.tensor.name) == watch.end()) continue;
    // Room for every element touched three times over (softmax's online form reads x three times).
    const int64_t per_lane = 3 * ((a.tensor.size + threads - 1) / threads) + 8;
    auto log = std::make_unique<AccessLog>();
    log->reset(b, 0, 1, threads, per_lane);
    a.tensor.access = log->data();
    a.tensor.access_words = log->size();
    logs[a.tensor.name] = std::move(log);
  }
  s.kernel = l.kernel;
  const std::optional<editable::Source> edited = editable::edited(l.rung);
  const editable::Fault f = editable::launch(b, edited ? &*edited : nullptr, l);
  if (f.kind != editable::Fault::None) s.error = "the edited kernel misbehaved (" + f.text() + "): its accesses are not counted";
  for (const std::string& name : watch) {
    auto it = logs.find(name);
    if (it == logs.end()) continue;
    const wa::Log log = wa::decode(it->second->to_host());
    // Loads, plain stores and atomic adds apart.
    for (int kind = 0; kind < 3; ++kind) {
      const bool store = kind > 0, atomic = kind == 2;
      std::vector<wa::Request> rs;
      for (const wa::Request& r : log.requests)
        if (r.store == store && r.atomic == atomic) rs.push_back(r);
      const wa::Totals t = wa::global_totals(rs, store ? wa::Kind::Store : wa::Kind::Load);
      if (!t.requests) continue;
      int64_t ideal = 0;
      for (const wa::Request& r : rs)
        if (r.issued()) ideal += wa::ideal_sectors(r.lanes(), r.bytes);
      s.accesses.push_back({name, store, atomic, t.requests, t.sectors_per_request(),
                            double(ideal) / double(t.requests), log.overflow});
    }
  }
}

void describe(Summary& s) {
  std::string line;
  for (const TensorAccess& a : s.accesses) {
    line += (line.empty() ? "" : ", ") + a.tensor + (a.atomic ? " adds " : a.store ? " stores " : " loads ") +
            figure(a.sectors_per_request);
    if (figure(a.ideal_per_request) != figure(a.sectors_per_request)) line += " (coalesced: " + figure(a.ideal_per_request) + ")";
    if (a.overflow) line += " (first requests only)";
  }
  if (!line.empty()) s.line = "sectors per request, " + s.shape + ": " + line;
}

int64_t cut(int64_t v, int64_t limit) { return v < limit ? v : limit; }

void vector_add(Summary& s, Backend b, const ParamValues& p) {
  const int block = int(p.get_int("block_size"));
  const int64_t n = cut(p.get_int("n"), block);  // program 0's elements
  Buffers m(b);
  s.shape = printf_text("program 0 (%lld elements)", (long long)n);
  run_logged(s, b, vector_add::detail::traced_launch(m.make(n), m.make(n), m.make(n), n, block, nullptr), {"x", "y", "out"});
}

void relu_dropout(Summary& s, Backend b, const ParamValues& p) {
  const int block = int(p.get_int("block_size"));
  const int64_t n = cut(p.get_int("n"), block);
  Buffers m(b);
  s.shape = printf_text("program 0 (%lld elements)", (long long)n);
  run_logged(s, b,
             relu_dropout::detail::traced_launch(m.make(n), m.make(n), n, p.get_float("p"), uint64_t(p.get_int("seed")),
                                                 block, nullptr),
             {"x", "out"});
}

void softmax(Summary& s, Backend b, const ParamValues& p) {
  const int64_t cols = p.get_int("n_cols");
  const bool online = p.get_text("view") == "online";
  const softmax::Variant v = online ? softmax::Variant::Online : softmax::Variant::Fixed;
  const int chunk = int(p.get_int("chunk"));
  softmax::detail::check_shape(b, v, 1, cols, chunk);
  Buffers m(b);
  s.shape = printf_text("program 0 of %s (one row of %lld columns)", online ? "online" : "fixed", (long long)cols);
  run_logged(s, b, softmax::detail::traced_launch(v, m.make(cols), m.make(cols), 1, cols, nullptr, chunk), {"x", "out"});
}

void attention(Summary& s, Backend b, const ParamValues& p) {
  attention::Shape sh;
  sh.lq = cut(p.get_int("lq"), 16);  // one query block: program 0's
  sh.lk = p.get_int("lk");
  sh.d = int(p.get_int("d"));
  attention::check_wall(sh.lk, sh.d, attention::smem_limit(b), b == Backend::Cpu);
  attention::Options o;
  o.causal = p.get_bool("causal");
  o.scale = p.get_float("scale");
  Buffers m(b);
  s.shape = printf_text("program 0 (16 queries, all %lld keys)", (long long)sh.lk);
  run_logged(s, b,
             attention::detail::traced_launch(m.make(sh.lq * sh.d), m.make(sh.lk * sh.d), m.make(sh.lk * sh.d),
                                              m.make(sh.lq * sh.d), sh, o.resolved_scale(sh.d), o.causal, {}),
             {"k", "v", "q", "out"});
}

void flash_attention(Summary& s, Backend b, const ParamValues& p) {
  const int bm = int(p.get_int("block_m")), bn = int(p.get_int("block_n"));
  flash_attention::Shape sh;
  sh.lq = cut(p.get_int("lq"), bm);      // one query block
  sh.lk = cut(p.get_int("lk"), 8 * bn);  // at most 8 K/V tiles: every tile's requests are alike
  sh.d = int(p.get_int("d"));
  flash_attention::check_tiles(b, bm, bn, sh.d);
  attention::Options o;
  o.causal = p.get_bool("causal");
  Buffers m(b);
  s.shape = printf_text("program 0 (%d queries, %lld K/V tile%s)", bm, (long long)((sh.lk + bn - 1) / bn),
                        sh.lk > bn ? "s" : "");
  run_logged(s, b,
             flash_attention::detail::teaching_launch(m.make(sh.lq * sh.d), m.make(sh.lk * sh.d), m.make(sh.lk * sh.d),
                                                      m.make(sh.lq * sh.d), sh, o.resolved_scale(sh.d), o.causal, bm, bn,
                                                      nullptr),
             {"k", "v", "q", "out"});
  s.tma = "The fast kernel on an H100/H200 (wgmma) brings its Q, K and V tiles in by TMA: the copy engine moves whole "
          "tiles, so there are no per-lane requests to count (the mma.sync kernel elsewhere: cp.async, 16 bytes a lane).";
}

void backward(Summary& s, Backend b, const ParamValues& p) {
  const int bm = int(p.get_int("block_m")), bn = int(p.get_int("block_n"));
  flash_attention_backward::Shape sh;
  sh.lq = p.get_int("lq");
  sh.lk = cut(p.get_int("lk"), bn);  // one K/V tile: program 0's
  sh.d = std::stoi(p.get_text("d"));
  flash_attention_backward::check_tiles(b, bm, bn, sh.d);
  attention::Options o;
  o.causal = p.get_bool("causal");
  const int64_t nq = sh.lq * sh.d, nk = sh.lk * sh.d;
  Buffers m(b);
  s.shape = printf_text("program 0 (K/V tile 0, %lld queries)", (long long)sh.lq);
  run_logged(s, b,
             flash_attention_backward::detail::teaching_launch(m.make(nq), m.make(nk), m.make(nk), m.make(sh.lq),
                                                               m.make(sh.lq), m.make(nq), m.make(nq), m.make(nk),
                                                               m.make(nk), sh, o.resolved_scale(sh.d), o.causal, bm, bn,
                                                               nullptr),
             {"k", "v", "q", "dout", "dq", "dk", "dv"});
  s.tma = std::string("The fast backward's default on an H100/H200 (") + flash_attention_backward::kFastBackwardDefaultSm90 +
          ") brings each step's Q_i and dO_i in by TMA and adds its dQ into the fp32 accumulator by bulk tensor "
          "reduce-adds from shared memory: whole tiles, no per-lane requests to count. Its K_j and V_j, read once a "
          "CTA, come by cp.async (16 bytes a lane), as everything does in the mma.sync kernel elsewhere, which adds dQ "
          "with atomics.";
}

}  // namespace

Summary summarize(const std::string& panel, Backend b, const ParamValues& p) {
  Summary s;
  s.panel = panel;
  try {
    if (panel == "vector-add") vector_add(s, b, p);
    else if (panel == "relu-dropout") relu_dropout(s, b, p);
    else if (panel == "softmax") softmax(s, b, p);
    else if (panel == "attention") attention(s, b, p);
    else if (panel == "flash-attention") flash_attention(s, b, p);
    else if (panel == "backward") backward(s, b, p);
    else return s;
  } catch (const InputError& e) {  // settings the rung refuses, an edited source that does not compile
    s.accesses.clear();
    s.error = e.what();
    return s;
  }  // anything else (a failed launch: RuntimeError) is a failure the panel shows as one
  describe(s);
  return s;
}

}  // namespace kl::study::memory_access
