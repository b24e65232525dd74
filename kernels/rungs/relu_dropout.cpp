// Rung 2, host side: the reference, the CPU backend's program-by-program launches, `run` and `bench`.
#include "kernels/rungs/relu_dropout.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "kernels/runtime/cell_state.h"
#include "kernels/runtime/errors.h"
#include "kernels/rungs/philox.h"

namespace kl::relu_dropout {

void check_p(double p) {
  if (!(p >= 0.0 && p < 1.0))
    throw InputError(out_of_range_message("p", std::to_string(p), "numbers in [0, 1)"));
}

float keep_scale(double p) { return float(1.0 / (1.0 - p)); }

void reference(const float* x, float* out, uint8_t* keep, int64_t n, double p, uint64_t seed) {
  check_p(p);
  const uint32_t thr = philox::drop_threshold(p);
  for (int64_t i = 0; i < n; ++i) {
    const bool kept = !philox::dropped(philox::element_word(seed, uint64_t(i)), thr);
    const double r = x[i] > 0.0f ? double(x[i]) : 0.0;
    out[i] = kept ? float(r / (1.0 - p)) : 0.0f;
    if (keep) keep[i] = kept ? kKept : kDropped;
  }
}

namespace detail {

void check_args(int64_t n, double p, int block_size) {
  require_range("n", n, 1, kMaxRunN);
  check_p(p);
  if (!is_power_of_2(block_size) || block_size < kMinBlock || block_size > kMaxBlock)
    throw InputError(out_of_range_message("block_size", std::to_string(block_size),
                                          "powers of two in [32, 4096]"));
}

inline float relu(float v) { return v > 0.0f ? v : 0.0f; }

// One program of the fused (mode 0), relu-only (1) or dropout-only (2) kernel, exactly as a CUDA block
// runs it: groups of 4 consecutive elements, one Philox call per group.
static void program(int mode, int64_t pid, const float* x, float* out, int64_t n, uint32_t thr, float scale,
                    uint64_t seed, int block) {
  const int64_t g0 = pid * block / 4, g1 = g0 + block / 4;
  for (int64_t g = g0; g < g1; ++g) {
    if (4 * g >= n) break;
    philox::U32x4 w{};
    if (mode != 1) w = philox::group_words(seed, uint64_t(g));
    for (int k = 0; k < 4; ++k) {
      const int64_t i = 4 * g + k;
      if (i >= n) break;
      const float v = mode == 2 ? x[i] : relu(x[i]);
      if (mode == 1) out[i] = v;
      else out[i] = philox::dropped(w.v[k], thr) ? 0.0f : v * scale;
    }
  }
}

static void run_cpu(int mode, const float* x, float* out, int64_t n, uint32_t thr, float scale, uint64_t seed,
                    int block) {
  const int64_t grid = (n + block - 1) / block;
  for (int64_t pid = 0; pid < grid; ++pid) program(mode, pid, x, out, n, thr, scale, seed, block);
}

editable::Launch traced_launch(const float* x, float* out, int64_t n, double p, uint64_t seed, int block,
                               DropoutTraceView* t) {
  using editable::DType;
  editable::Launch l;
  l.rung = "relu-dropout";
  l.kernel = "relu_dropout_traced";
  const int64_t grid = (n + block - 1) / block;
  l.grid.x = uint32_t(grid);
  l.block.x = uint32_t(block < 1024 ? block : 1024);
  l.args = {editable::tensor("x", DType::F32, const_cast<float*>(x), n, false),
            editable::tensor("out", DType::F32, out, n, true, t ? t->elements.writer : nullptr,
                             t ? t->elements.write_count : nullptr),
            t ? editable::tensor("keep", DType::U8, t->keep, n, true) : editable::absent("keep", DType::U8),
            t ? editable::tensor("lane_state", DType::U8, t->elements.lane_state, grid * block, true)
              : editable::absent("lane_state", DType::U8),
            editable::i64("n", n),
            editable::f32("p", float(p)),
            editable::i32("threshold", int32_t(philox::drop_threshold(p))),  // <= 2^24
            editable::f32("scale", keep_scale(p)),
            editable::i64("seed", int64_t(seed)),
            editable::i32("BLOCK_SIZE", block)};
  return l;
}

}  // namespace detail

void run_fused(Backend b, const float* x, float* out, int64_t n, double p, uint64_t seed, int block_size) {
  detail::check_args(n, p, block_size);
  const uint32_t thr = philox::drop_threshold(p);
  const float scale = keep_scale(p);
  if (b == Backend::Cpu) return detail::run_cpu(0, x, out, n, thr, scale, seed, block_size);
#ifdef KL_HAS_CUDA
  detail::run_cuda_elementwise(0, x, out, n, thr, scale, seed, block_size);
#else
  throw RuntimeError("built without CUDA");
#endif
}

void run_unfused(Backend b, const float* x, float* tmp, float* out, int64_t n, double p, uint64_t seed,
                 int block_size) {
  detail::check_args(n, p, block_size);
  const uint32_t thr = philox::drop_threshold(p);
  const float scale = keep_scale(p);
  if (b == Backend::Cpu) {
    detail::run_cpu(1, x, tmp, n, thr, scale, seed, block_size);
    detail::run_cpu(2, tmp, out, n, thr, scale, seed, block_size);
    return;
  }
#ifdef KL_HAS_CUDA
  detail::run_cuda_elementwise(1, x, tmp, n, thr, scale, seed, block_size);
  detail::run_cuda_elementwise(2, tmp, out, n, thr, scale, seed, block_size);
#else
  throw RuntimeError("built without CUDA");
#endif
}

editable::Fault run_traced(Backend b, const float* x, float* out, int64_t n, double p, uint64_t seed,
                           int block_size, DropoutTraceView* trace, const editable::Source* src) {
  detail::check_args(n, p, block_size);
  if (trace && (trace->elements.n != n || trace->elements.block_size != block_size))
    throw RuntimeError("relu_dropout: trace was reset for another shape");
  const editable::Fault f = editable::launch(b, src, detail::traced_launch(x, out, n, p, seed, block_size, trace));
  if (!src && f.kind != editable::Fault::None) throw RuntimeError("relu_dropout (shipped): " + f.text());
  return f;
}

Summary summarize(Backend b, const float* x, const float* out, const uint8_t* keep, int64_t n, double ratio_lo,
                  double ratio_hi, int bins) {
  Summary s;
  s.ratio_lo = ratio_lo;
  s.ratio_hi = ratio_hi;
  s.ratio_hist.assign(size_t(bins), 0);
  std::vector<unsigned long long> c(size_t(bins) + 5, 0);
  const float lo = float(ratio_lo), hi = float(ratio_hi);
  if (b == Backend::Cpu) {
    for (int64_t i = 0; i < n; ++i) {
      if (keep[i] == kKept) {
        ++c[size_t(bins) + 2];
        if (x[i] > 0.0f) {
          ++c[size_t(bins) + 4];
          const float r = out[i] / x[i];
          if (r < lo) ++c[size_t(bins)];
          else if (r >= hi) ++c[size_t(bins) + 1];
          else ++c[std::min(size_t(bins) - 1, size_t(double(r - lo) / double(hi - lo) * bins))];
        }
      } else if (keep[i] == kDropped) {
        ++c[size_t(bins) + 3];
      }
    }
  } else {
#ifdef KL_HAS_CUDA
    Buffer<unsigned long long> dc(b, c.size());
    dc.fill_bytes(0);
    detail::summarize_cuda(x, out, keep, n, lo, hi, bins, dc.data());
    c = dc.to_host();
#else
    throw RuntimeError("built without CUDA");
#endif
  }
  for (int k = 0; k < bins; ++k) s.ratio_hist[size_t(k)] = uint32_t(c[size_t(k)]);
  s.ratio_below = int64_t(c[size_t(bins)]);
  s.ratio_above = int64_t(c[size_t(bins) + 1]);
  s.kept = int64_t(c[size_t(bins) + 2]);
  s.dropped = int64_t(c[size_t(bins) + 3]);
  s.survivors = int64_t(c[size_t(bins) + 4]);
  s.not_run = n - s.kept - s.dropped;
  return s;
}

void mask_cells(Backend b, const uint8_t* keep, int64_t n, int width, int height, float* cells) {
  const int64_t count = int64_t(width) * height;
  if (b == Backend::Cpu) {
    for (int64_t i = 0; i < count; ++i) {
      if (i >= n) cells[2 * i] = 0.0f, cells[2 * i + 1] = cell_value(kCellMasked);
      else if (keep[i] == kKept) cells[2 * i] = 1.0f, cells[2 * i + 1] = cell_value(kCellNormal);
      else if (keep[i] == kDropped) cells[2 * i] = 0.0f, cells[2 * i + 1] = cell_value(kCellNormal);
      else cells[2 * i] = 0.0f, cells[2 * i + 1] = cell_value(kCellUnwritten);
    }
    return;
  }
#ifdef KL_HAS_CUDA
  detail::mask_cells_cuda(keep, n, count, cells);
#else
  throw RuntimeError("built without CUDA");
#endif
}

std::vector<bench::Row> bench_rows(Backend b, bool quick) {
  const int64_t n = quick ? (int64_t(1) << 20) : (int64_t(1) << 26);
  const int block = 4096;
  const double p = 0.5;
  const uint64_t seed = 1234;
  std::vector<float> hx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    hx[size_t(i)] = philox::uniform(philox::element_word(99, uint64_t(i))) * 2.0f - 1.0f;
  Buffer<float> x(b, size_t(n)), out(b, size_t(n)), tmp(b, size_t(n));
  x.upload(hx);
  const int iters = (b == Backend::Cpu) ? 5 : 50;
  const bench::Timing tf =
      bench::time(b, [&] { run_fused(b, x.data(), out.data(), n, p, seed, block); }, 3, iters);
  const bench::Timing tu =
      bench::time(b, [&] { run_unfused(b, x.data(), tmp.data(), out.data(), n, p, seed, block); }, 3, iters);
  const double copy = bench::copy_bandwidth_gbs(b, size_t(n) * sizeof(float));
  const std::string shape = "n=" + std::to_string(n) + " p=0.5";  // the bench command says which backend
  char copy_text[64];
  std::snprintf(copy_text, sizeof copy_text, "%s copy %.0f GB/s", b == Backend::Cpu ? "CPU" : "d2d", copy);

  std::vector<bench::Row> rows;
  bench::Row r;
  r.kernel = "relu-dropout";
  r.shape = shape;
  r.variant = "fused";
  r.ms = tf.median_ms;
  r.gbs = 8.0 * double(n) / (tf.median_ms * 1e-3) / 1e9;
  r.ratio = r.gbs / copy;
  r.baseline = copy_text;
  rows.push_back(r);
  r.variant = "unfused";
  r.ms = tu.median_ms;
  r.gbs = 16.0 * double(n) / (tu.median_ms * 1e-3) / 1e9;  // relu writes, dropout reads back
  r.ratio = r.gbs / copy;
  rows.push_back(r);
  r.variant = "fused vs unfused";
  r.ms = tf.median_ms;
  r.gbs = 8.0 * double(n) / (tf.median_ms * 1e-3) / 1e9;
  r.ratio = tu.median_ms / tf.median_ms;  // speed-up of fusion
  r.baseline = "unfused";
  rows.push_back(r);
  return rows;
}

ParamSpec param::p() { return float_param("p", 0.0, 1.0, 0.5, "drop probability", /*hi_exclusive=*/true); }
ParamSpec param::seed() {
  return int_param("seed", 0, kMaxSeed, 1234, "Philox key: same seed, same mask on every backend");
}
ParamSpec param::block_size() {
  return pow2_param("block_size", kMinBlock, kMaxBlock, 1024, "BLOCK_SIZE: elements per program");
}

KernelEntry entry() {
  KernelEntry e;
  e.name = "relu-dropout";
  e.summary = "out = dropout(relu(x), p) with a Philox(seed, index) mask, survivors scaled by 1/(1-p)";
  e.variants = {"fused", "unfused", "traced"};
  e.untraced_variants = {"fused", "unfused"};
  e.default_variant = "fused";
  e.inputs = {"x"};
  e.params = {param::p(), param::seed(), param::block_size()};
  e.run = [](const KernelRunRequest& r) {
    const Array& x = r.inputs.at("x");
    const int64_t n = x.size();
    require_range("n (elements of x)", n, 1, kMaxRunN);
    const double p = r.params.get_float("p");
    check_p(p);
    const uint64_t seed = uint64_t(r.params.get_int("seed"));
    const int block = int(r.params.get_int("block_size"));
    Buffer<float> dx(r.backend, size_t(n)), dout(r.backend, size_t(n));
    dx.upload(x.data);
    dout.fill_bytes(0xFF);  // poison: elements nobody writes come back as NaN
    KernelRunResult res;
    if (r.source && r.variant != "traced")
      throw InputError("--source: --variant " + r.variant + " is not editable; the editable source is the traced "
                       "version's (add --variant traced)");
    if (r.variant == "unfused") {
      Buffer<float> tmp(r.backend, size_t(n));
      run_unfused(r.backend, dx.data(), tmp.data(), dout.data(), n, p, seed, block);
    } else if (r.variant == "traced") {
      DropoutTrace t;
      t.reset(r.backend, n, block);
      DropoutTraceView v = t.view();
      const editable::Fault f = run_traced(r.backend, dx.data(), dout.data(), n, p, seed, block, &v, r.source);
      if (f.kind != editable::Fault::None) throw editable::FaultError(f);
      const std::vector<uint8_t> keep = t.keep.to_host();
      Array k;
      k.shape = x.shape;
      k.data.resize(keep.size());
      for (size_t i = 0; i < keep.size(); ++i) k.data[i] = keep[i] == kKept ? 1.0f : 0.0f;
      res.outputs["trace_keep"] = std::move(k);
    } else {
      run_fused(r.backend, dx.data(), dout.data(), n, p, seed, block);
    }
    res.outputs["out"] = Array{x.shape, dout.to_host()};
    return res;
  };
  e.bench = [](Backend b, bool quick) { return bench_rows(b, quick); };
  return e;
}

}  // namespace kl::relu_dropout
