// Rung 1, host side: the reference, the traced launch of the editable kernel, and `run` wiring.
#include "kernels/rungs/vector_add.h"

#include <cstdio>

#include "kernels/runtime/errors.h"

namespace kl::vector_add {

void reference(const float* x, const float* y, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

namespace detail {

void check_shape(int64_t n, int block_size) {
  require_range("n", n, 1, kMaxRunN);
  if (!is_power_of_2(block_size) || block_size < kMinBlock || block_size > kMaxBlock)
    throw InputError(out_of_range_message("block_size", std::to_string(block_size),
                                          "powers of two in [32, 4096]"));
}

editable::Launch traced_launch(const float* x, const float* y, float* out, int64_t n, int block, ElementTraceView* t) {
  using editable::DType;
  editable::Launch l;
  l.rung = "vector-add";
  l.kernel = "vector_add_traced";
  const int64_t grid = (n + block - 1) / block;
  l.grid.x = uint32_t(grid);
  l.block.x = uint32_t(block < 1024 ? block : 1024);
  l.args = {editable::tensor("x", DType::F32, const_cast<float*>(x), n, false),
            editable::tensor("y", DType::F32, const_cast<float*>(y), n, false),
            editable::tensor("out", DType::F32, out, n, true, t ? t->writer : nullptr, t ? t->write_count : nullptr),
            t ? editable::tensor("lane_state", DType::U8, t->lane_state, grid * block, true)
              : editable::absent("lane_state", DType::U8),
            editable::i64("n", n), editable::i32("BLOCK_SIZE", block)};
  return l;
}

}  // namespace detail

editable::Fault run_traced(Backend b, const float* x, const float* y, float* out, int64_t n, int block_size,
                           ElementTraceView* trace, const editable::Source* src) {
  detail::check_shape(n, block_size);
  if (trace && (trace->n != n || trace->block_size != block_size))
    throw RuntimeError("vector_add: trace was reset for another shape");
  const editable::Fault f = editable::launch(b, src, detail::traced_launch(x, y, out, n, block_size, trace));
  if (!src && f.kind != editable::Fault::None) throw RuntimeError("vector_add (shipped): " + f.text());
  return f;
}

void run_fast(Backend b, const float* x, const float* y, float* out, int64_t n) {
  require_range("n", n, 1, kMaxRunN);
  if (b == Backend::Cpu) return reference(x, y, out, n);
#ifdef KL_HAS_CUDA
  detail::run_cuda_fast(x, y, out, n);
#else
  throw RuntimeError("built without CUDA");
#endif
}

ParamSpec param::block_size() {
  return pow2_param("block_size", kMinBlock, kMaxBlock, 1024, "BLOCK_SIZE: elements per program");
}

KernelEntry entry() {
  KernelEntry e;
  e.name = "vector-add";
  e.summary = "out = x + y, one program per BLOCK_SIZE elements, the tail masked";
  e.variants = {"traced", "fast"};
  e.untraced_variants = {"fast"};
  e.default_variant = "traced";
  e.inputs = {"x", "y"};
  e.params = {param::block_size()};
  e.run = [](const KernelRunRequest& r) {
    const Array& x = r.inputs.at("x");
    const Array& y = r.inputs.at("y");
    if (x.shape != y.shape)
      throw InputError("--in y: shape " + y.shape_text() + " does not match x's " + x.shape_text());
    const int64_t n = x.size();
    require_range("n (elements of x)", n, 1, kMaxRunN);
    const int block = int(r.params.get_int("block_size"));
    if (r.variant == "fast" && r.backend == Backend::Cpu)
      throw InputError("--variant fast: runs on the CUDA backend only; use --variant traced on the CPU");
    Buffer<float> dx(r.backend, size_t(n)), dy(r.backend, size_t(n)), dout(r.backend, size_t(n));
    dx.upload(x.data);
    dy.upload(y.data);
    dout.fill_bytes(0xFF);  // poison: elements nobody writes come back as NaN
    if (r.variant == "fast" && r.source)
      throw InputError("--source: --variant fast is not editable; the editable source is the traced version's");
    if (r.variant == "fast") {
      run_fast(r.backend, dx.data(), dy.data(), dout.data(), n);
    } else {
      const editable::Fault f = run_traced(r.backend, dx.data(), dy.data(), dout.data(), n, block, nullptr, r.source);
      if (f.kind != editable::Fault::None) throw editable::FaultError(f);
    }
    KernelRunResult res;
    res.outputs["out"] = Array{x.shape, dout.to_host()};
    return res;
  };
  e.bench = [](Backend b, bool quick) {
    const int64_t n = quick ? (int64_t(1) << 20) : (int64_t(1) << 26);
    Buffer<float> x(b, size_t(n)), y(b, size_t(n)), out(b, size_t(n));
    x.fill_bytes(0);
    y.fill_bytes(0);
    const double copy_gbs = bench::copy_bandwidth_gbs(b, size_t(n) * 4);
    const double bytes = 12.0 * double(n);  // read x and y, write out
    std::vector<bench::Row> rows;
    auto row = [&](const char* variant, const std::function<void()>& fn) {
      const bench::Timing t = bench::time(b, fn);
      bench::Row r;
      r.kernel = "vector-add";
      r.variant = variant;
      r.shape = "n=2^" + std::to_string(quick ? 20 : 26) + " fp32";
      r.ms = t.median_ms;
      r.gbs = bytes / (t.median_ms * 1e-3) / 1e9;
      r.ratio = r.gbs / copy_gbs;
      char base[96];
      snprintf(base, sizeof base, "%s copy %.0f GB/s", b == Backend::Cuda ? "device-to-device" : "CPU memcpy",
               copy_gbs);
      r.baseline = base;
      rows.push_back(r);
    };
    if (b == Backend::Cuda) {
      row("fast", [&] { run_fast(b, x.data(), y.data(), out.data(), n); });
      row("traced", [&] { run_traced(b, x.data(), y.data(), out.data(), n, 1024, nullptr); });
    } else {
      row("traced (CPU)", [&] { run_traced(b, x.data(), y.data(), out.data(), n, 1024, nullptr); });
    }
    return rows;
  };
  return e;
}

}  // namespace kl::vector_add
