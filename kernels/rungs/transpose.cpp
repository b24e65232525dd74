// Rung 1½, host side: the reference, the traced launches of the editable kernels, `run`, `bench` and the
// registry entry.
#include "kernels/rungs/transpose.h"

#include <cstdio>

#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"

namespace kl::transpose {

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::Naive: return "naive";
    case Variant::Tiled: return "tiled";
    case Variant::Padded: return "padded";
  }
  return "?";
}

Variant parse_variant(const std::string& name) {
  for (Variant v : kVariants)
    if (name == variant_name(v)) return v;
  throw InputError("--variant " + name + ": must be one of naive|tiled|padded");
}

const char* kernel_name(Variant v) {
  switch (v) {
    case Variant::Naive: return "transpose_naive";
    case Variant::Tiled: return "transpose_tiled";
    case Variant::Padded: return "transpose_padded";
  }
  return "?";
}

void reference(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
}

int64_t grid_x(int64_t cols) { return (cols + kTile - 1) / kTile; }
int64_t grid_y(int64_t rows) { return (rows + kTile - 1) / kTile; }

void TransposeTrace::reset(Backend b, int64_t rows, int64_t cols, int64_t program) {
  const int64_t n = rows * cols, programs = grid_x(cols) * grid_y(rows);
  writer.resize(b, size_t(n));
  write_count.resize(b, size_t(n));
  writer.fill_bytes(0xFF);
  write_count.fill_bytes(0);
  for (AccessLog* log : {&in, &out, &tile}) log->reset(b, program, programs, kThreads, kLogRoom);
}

TransposeTraceView TransposeTrace::view() { return {writer.data(), write_count.data(), &in, &out, &tile}; }

namespace detail {

void check_shape(int64_t rows, int64_t cols) {
  require_range("rows", rows, 1, kMaxSide);
  require_range("cols", cols, 1, kMaxElements);
  if (rows * cols > kMaxElements)
    throw InputError(out_of_range_message("rows x cols", std::to_string(rows) + " x " + std::to_string(cols),
                                          "at most 2147483647 elements"));
}

namespace {
editable::Arg with_log(editable::Arg a, AccessLog* log) {
  if (log && log->size()) {
    a.tensor.access = log->data();
    a.tensor.access_words = log->size();
  }
  return a;
}
}  // namespace

editable::Launch traced_launch(Variant v, const float* in, float* out, int64_t rows, int64_t cols,
                               TransposeTraceView* t) {
  using editable::DType;
  editable::Launch l;
  l.rung = "transpose";
  l.kernel = kernel_name(v);
  l.grid.x = uint32_t(grid_x(cols));
  l.grid.y = uint32_t(grid_y(rows));
  l.block.x = kTile;
  l.block.y = kBlockRows;
  const int64_t n = rows * cols;
  l.args = {with_log(editable::tensor("in", DType::F32, const_cast<float*>(in), n, false), t ? t->in : nullptr),
            with_log(editable::tensor("out", DType::F32, out, n, true, t ? t->writer : nullptr,
                                      t ? t->write_count : nullptr),
                     t ? t->out : nullptr)};
  if (v != Variant::Naive) {
    AccessLog* tile = t ? t->tile : nullptr;
    // The tile's log travels as the kernel's kl::Tensor<uint32_t> tile_log: two uint32 per 64-bit word.
    l.args.push_back(tile && tile->size()
                         ? editable::tensor("tile_log", DType::U32, tile->data(), tile->size() * 2, true)
                         : editable::absent("tile_log", DType::U32));
  }
  l.args.push_back(editable::i32("rows", int32_t(rows)));
  l.args.push_back(editable::i32("cols", int32_t(cols)));
  return l;
}

}  // namespace detail

editable::Fault run(Backend b, Variant v, const float* in, float* out, int64_t rows, int64_t cols,
                    TransposeTraceView* trace, const editable::Source* src) {
  detail::check_shape(rows, cols);
  if (!trace && !src && b == Backend::Cuda) {
    run_fast(b, v, in, out, rows, cols);
    return {};
  }
  const editable::Fault f = editable::launch(b, src, detail::traced_launch(v, in, out, rows, cols, trace));
  if (!src && f.kind != editable::Fault::None) throw RuntimeError(std::string("transpose (shipped): ") + f.text());
  return f;
}

void run_fast(Backend b, Variant v, const float* in, float* out, int64_t rows, int64_t cols) {
  detail::check_shape(rows, cols);
  if (b == Backend::Cpu) throw InputError("transpose fast: runs on the CUDA backend only (the CPU runs the traced build)");
#ifdef KL_HAS_CUDA
  detail::run_cuda_fast(v, in, out, rows, cols);
#else
  (void)v, (void)in, (void)out;
  throw RuntimeError("built without CUDA");
#endif
}

std::vector<bench::Row> bench_rows(Backend b, bool quick) {
  const bool gpu = b == Backend::Cuda;
  const int64_t side = gpu ? (quick ? 1024 : kBenchSide) : (quick ? 256 : 1024);
  const int64_t n = side * side;
  std::vector<float> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[size_t(i)] = float(i % 1000);
  // The copy and each transpose move the same bytes: the matrix read once and written once. Sets that span
  // four L2s where one matrix does not (the quick size fits the H200's L2).
  const size_t bytes = size_t(n) * sizeof(float);
  const int sets = bench::cold_sets(b, 2 * bytes);
  std::vector<Buffer<float>> in, out;
  for (int k = 0; k < sets; ++k) {
    in.emplace_back(b, size_t(n));
    in.back().upload(host);
    out.emplace_back(b, size_t(n));
  }
  const double copy = bench::copy_bandwidth_gbs(b, bytes, sets);
  char base[96];
  std::snprintf(base, sizeof base, "%s copy %.0f GB/s%s", gpu ? "device-to-device" : "CPU memcpy", copy,
                sets > 1 ? (", " + std::to_string(sets) + " sets").c_str() : "");
  std::vector<bench::Row> rows;
  auto row = [&](std::string variant, Variant v, bool fast) {
    int k = 0;
    TransposeTraceView tv;  // no records: the traced build as it runs untraced
    const bench::Timing t = bench::time(
        b,
        [&] {
          if (fast) run_fast(b, v, in[size_t(k)].data(), out[size_t(k)].data(), side, side);
          else run(b, v, in[size_t(k)].data(), out[size_t(k)].data(), side, side, &tv);
          k = (k + 1) % sets;
        },
        gpu ? 5 : 1, gpu ? 30 : 3);
    bench::Row r;
    r.kernel = "transpose";
    r.variant = std::move(variant);
    r.shape = std::to_string(side) + "x" + std::to_string(side) + " fp32";
    r.ms = t.median_ms;
    r.gbs = 2.0 * double(bytes) / (t.median_ms * 1e-3) / 1e9;
    r.ratio = r.gbs / copy;
    r.baseline = base;
    rows.push_back(r);
  };
  for (Variant v : kVariants)
    if (gpu) row(variant_name(v), v, true);
  for (Variant v : kVariants) row(std::string("traced ") + variant_name(v), v, false);
  return rows;
}

KernelEntry entry() {
  KernelEntry e;
  e.name = "transpose";
  e.summary = "out = in^T for in [rows, cols]: naive (strided writes), tiled (shared memory, bank conflicts), padded";
  e.variants = {"naive", "tiled", "padded"};
  e.default_variant = "padded";
  e.inputs = {"x"};
  e.run = [](const KernelRunRequest& r) {
    const Array& x = r.inputs.at("x");
    if (x.shape.size() != 2) throw InputError("--in x: shape " + x.shape_text() + " must be [rows, cols]");
    const int64_t rows = x.shape[0], cols = x.shape[1];
    const Variant v = parse_variant(r.variant);
    detail::check_shape(rows, cols);
    Buffer<float> din(r.backend, size_t(rows * cols)), dout(r.backend, size_t(rows * cols));
    din.upload(x.data);
    dout.fill_bytes(0xFF);  // poison: elements nobody writes come back as NaN
    const editable::Fault f = run(r.backend, v, din.data(), dout.data(), rows, cols, nullptr, r.source);
    if (f.kind != editable::Fault::None) throw editable::FaultError(f);
    KernelRunResult res;
    res.outputs["out"] = Array{{cols, rows}, dout.to_host()};
    return res;
  };
  e.bench = [](Backend b, bool quick) { return bench_rows(b, quick); };
  return e;
}

}  // namespace kl::transpose
