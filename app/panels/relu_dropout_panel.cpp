// Rung 2 panel: fused ReLU + dropout, read through its statistics. The keep mask the traced kernel
// recorded (as a raster), the empirical drop rate against p with a 99% binomial interval (this seed and
// 24 more), the histogram of survivor/x ratios (one spike at 1/(1-p)), and bytes moved and measured
// time for fused against unfused.
// [SECTION] panel state and parameters
// [SECTION] drawing
// [SECTION] computing (kernels run here; the mask raster is filled on the backend)
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "app/panels/panels.h"
#include "app/ui.h"
#include "kernels/measure/bench.h"
#include "kernels/runtime/errors.h"
#include "kernels/rungs/philox.h"
#include "kernels/rungs/relu_dropout.h"
#include "viz/data_texture.h"
#include "viz/heatmap.h"
#include "viz/plot.h"

namespace kl::app {
namespace {

namespace rd = relu_dropout;
constexpr int64_t kPanelMaxN = int64_t(1) << 20;
constexpr int kSeeds = 25;      // the rate plot: this seed and the next 24
constexpr int kBins = 16;       // ratio histogram over [0, 2/(1-p))
constexpr double kZ99 = 2.5758; // two-sided 99% normal quantile

// [SECTION] panel state and parameters ---------------------------------------------------------------------
class ReluDropoutPanel : public Panel {
 public:
  ReluDropoutPanel()
      : params_({int_param("n", 1, kPanelMaxN, 65536, "number of elements"),
                 rd::param::p(), rd::param::seed(), rd::param::block_size()}) {
    mask_map_.set_scale({viz::ColorScale::Kind::Sequential, 0.0f, 1.0f, "kept (1) / dropped (0)"});
  }

  std::string id() const override { return "relu-dropout"; }
  std::string title() const override { return "2 · Fused ReLU + dropout"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override { return {"relu_dropout.cu", {"relu_dropout_kernel"}}; }
  std::vector<TourStop> tour_stops() const override {
    return {{"p0.5", {"p=0.5"}}, {"p0.1", {"p=0.1"}}, {"p0.9-n2pow20", {"p=0.9", "n=1048576"}}};
  }

  // [SECTION] drawing ---------------------------------------------------------------------------------------
  void draw(AppContext& ctx) override {
    const Backend b = ctx.backend.backend;
    if (ImGui::CollapsingHeader("Why a random kernel is tested by its distribution"))
      ui::explain("relu_dropout.md");
    ImGui::PushItemWidth(150);
    ui::param_row(params_, {"n", "p", "seed", "block_size"}, &control_error_);
    ImGui::PopItemWidth();
    ui::error_box(control_error_);

    const std::string key = ui::settings_key(params_, {"n", "p", "seed", "block_size"}, b);
    if (key != key_) {
      key_ = key;
      try {
        compute(b);
        run_error_.clear();
      } catch (const std::exception& e) {
        run_error_ = ui::error_text(e);
        valid_ = false;
      }
    }
    ui::error_box(run_error_);
    if (!valid_) return;

    ImGui::Text("out = keep ? max(x, 0) / (1 - p) : 0,   keep = Philox(seed, i) >= p,   scale 1/(1-p) = %.6g",
                double(rd::keep_scale(p_)));
    ui::status_line("matches reference:", check_text_, check_ok_);
    ui::status_line("fused == traced == unfused, bit for bit:", same_text_, same_ok_);

    const float avail = ImGui::GetContentRegionAvail().x, gap = 16.0f;
    const float left_w = std::min(avail * 0.42f, ImGui::GetContentRegionAvail().y - 60.0f);
    const float right_w = avail - left_w - gap;

    // Left: the mask raster.
    ImGui::BeginGroup();
    ui::section("Keep mask (recorded by the traced kernel)");
    ImGui::TextDisabled("%d x %d cells, one element each, row-major; grey hatched: past n", mask_w_, mask_h_);
    const float img = left_w - mask_map_.colorbar_width();
    const float img_h = img * float(mask_h_) / float(mask_w_);
    viz::HeatmapHover h = mask_map_.draw("mask", mask_tex_, ImVec2(img, std::max(40.0f, img_h)), fresh_);
    fresh_ = false;
    if (h.active) {
      const int64_t i = int64_t(h.row) * mask_w_ + h.col;
      if (i >= 0 && i < n_) {
        const uint32_t w = philox::element_word(seed_, uint64_t(i));
        ImGui::SetTooltip("element %" PRId64 "  (pid %" PRId64 ", Philox group %" PRId64 ", word %d)\n"
                          "u = %.6f  %s  p = %.4g\nx = %.4f", i, i / block_, i / 4, int(i % 4),
                          double(philox::uniform(w)), philox::uniform(w) < p_ ? "<" : ">=", p_, hx_[size_t(i)]);
      }
    }
    ImGui::EndGroup();
    ImGui::SameLine(0, gap);

    // Right: the statistics; the three plots share the height that is left.
    ImGui::BeginGroup();
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float plot_h = std::max(110.0f, (ImGui::GetContentRegionAvail().y - 7.5f * line) / 3.0f);
    ui::section("Drop rate against p");
    const double sigma = std::sqrt(p_ * (1 - p_) / double(n_));
    ImGui::Text("dropped %" PRId64 " of %" PRId64 " = %.4f;  99%% binomial interval p +- 2.576 sqrt(p(1-p)/n) = "
                "[%.4f, %.4f]", dropped_, n_, rate_, p_ - kZ99 * sigma, p_ + kZ99 * sigma);
    ui::status_line("this seed's rate inside the interval:", inside_ ? "yes" : "no", inside_);
    ImGui::SameLine();
    ImGui::TextDisabled("  (%d of %d seeds inside; expect about 1 in 100 outside)", seeds_inside_, kSeeds);
    viz::PlotOptions ro;
    ro.title = "empirical drop rate, seeds " + std::to_string(seed_) + ".." + std::to_string(seed_ + kSeeds - 1);
    ro.x_label = "seed offset";
    ro.y_label = "rate";
    ro.y_min = p_ - 5 * sigma;
    ro.y_max = p_ + 5 * sigma;
    if (ro.y_min == ro.y_max) ro.y_min -= 0.01, ro.y_max += 0.01;
    viz::line_plot("rates", {rate_series_, band_lo_, band_p_, band_hi_}, ro, ImVec2(right_w, plot_h));

    ui::section("Survivors: out / x for kept elements with x > 0");
    viz::PlotOptions ho;
    ho.title = "one spike at 1/(1-p) = " + fmt("%.4g", 1.0 / (1.0 - p_)) + " (" + std::to_string(survivors_) +
               " survivors, " + std::to_string(off_spike_) + " elsewhere)";
    ho.x_label = "out / x";
    ho.y_label = "count";
    viz::bar_chart("ratios", hist_bars_, ho, ImVec2(right_w, plot_h));

    ui::section(b == Backend::Cpu ? "What fusion saves (CPU backend: CPU figures)" : "What fusion saves (measured on the GPU)");
    std::vector<viz::Bar> bytes = {{"fused: 8 B/elem", 8.0 * double(n_) / 1e6, IM_COL32(90, 180, 240, 255)},
                                   {"unfused: 16 B/elem", 16.0 * double(n_) / 1e6, IM_COL32(235, 95, 80, 255)}};
    std::vector<viz::Bar> times = {{"fused", t_fused_ * 1e3, IM_COL32(90, 180, 240, 255)},
                                   {"unfused", t_unfused_ * 1e3, IM_COL32(235, 95, 80, 255)}};
    viz::PlotOptions bo;
    bo.title = "MB moved";
    const float bw = (right_w - gap) * 0.5f;
    const float bh = std::max(110.0f, std::min(plot_h, ImGui::GetContentRegionAvail().y - 4.0f));
    viz::bar_chart("bytes", bytes, bo, ImVec2(bw, bh));
    ImGui::SameLine(0, gap);
    viz::PlotOptions to;
    to.title = "median time, us (unfused / fused = " + fmt("%.2f", t_unfused_ / std::max(t_fused_, 1e-12)) + "x)";
    viz::bar_chart("times", times, to, ImVec2(bw, bh));
    ImGui::EndGroup();
  }

 private:
  static std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
  }

  // [SECTION] computing ---------------------------------------------------------------------------------------
  void compute(Backend b) {
    valid_ = false;
    n_ = params_.get_int("n");
    p_ = params_.get_float("p");
    seed_ = uint64_t(params_.get_int("seed"));
    block_ = int(params_.get_int("block_size"));
    rd::check_p(p_);
    // Inputs: uniform in [-1, 1] (half of them negative, so ReLU has work), from Philox under a fixed key.
    hx_.resize(size_t(n_));
    for (int64_t i = 0; i < n_; ++i) hx_[size_t(i)] = philox::uniform(philox::element_word(0x5eed, uint64_t(i))) * 2.0f - 1.0f;
    x_.resize(b, size_t(n_));
    x_.upload(hx_);
    out_.resize(b, size_t(n_));
    fused_.resize(b, size_t(n_));
    tmp_.resize(b, size_t(n_));
    out_.fill_bytes(0xFF);  // poison
    fused_.fill_bytes(0xFF);
    trace_.reset(b, n_, block_);
    rd::DropoutTraceView tv = trace_.view();
    rd::run_traced(b, x_.data(), out_.data(), n_, p_, seed_, block_, &tv);

    // Statistics on the backend; only the counts come back.
    const double scale = 1.0 / (1.0 - p_);
    const rd::Summary s = rd::summarize(b, x_.data(), out_.data(), trace_.keep.data(), n_, 0.0, 2.0 * scale, kBins);
    dropped_ = s.dropped;
    rate_ = double(s.dropped) / double(n_);
    survivors_ = s.survivors;
    const double sigma = std::sqrt(p_ * (1 - p_) / double(n_));
    inside_ = std::fabs(rate_ - p_) <= kZ99 * sigma + 1e-12;
    hist_bars_.clear();
    uint32_t peak = 0;
    for (int k = 0; k < kBins; ++k) peak = std::max(peak, s.ratio_hist[size_t(k)]);
    off_spike_ = s.ratio_below + s.ratio_above;
    for (int k = 0; k < kBins; ++k) {
      const double lo = 2.0 * scale * k / kBins;
      const uint32_t c = s.ratio_hist[size_t(k)];
      if (c != peak) off_spike_ += c;
      hist_bars_.push_back({fmt("%.2g", lo), double(c), c == peak && c ? IM_COL32(120, 220, 120, 255) : IM_COL32(140, 140, 150, 255)});
    }

    // The rate over 25 seeds, each against the same 99% band.
    rate_series_ = viz::Series{"drop rate per seed", {}, {}, IM_COL32(240, 200, 90, 255), true};
    seeds_inside_ = 0;
    Buffer<float> o(b, size_t(n_));
    rd::DropoutTrace t2;
    for (int k = 0; k < kSeeds; ++k) {
      t2.reset(b, n_, block_);
      rd::DropoutTraceView v2 = t2.view();
      rd::run_traced(b, x_.data(), o.data(), n_, p_, seed_ + uint64_t(k), block_, &v2);
      const rd::Summary sk = rd::summarize(b, x_.data(), o.data(), t2.keep.data(), n_, 0.0, 1.0, 1);
      const double r = double(sk.dropped) / double(n_);
      rate_series_.x.push_back(k);
      rate_series_.y.push_back(r);
      seeds_inside_ += std::fabs(r - p_) <= kZ99 * sigma + 1e-12;
    }
    band_lo_ = viz::Series{"99% interval", {0.0, double(kSeeds - 1)}, {p_ - kZ99 * sigma, p_ - kZ99 * sigma},
                           IM_COL32(150, 150, 150, 255), false};
    band_hi_ = viz::Series{"", {0.0, double(kSeeds - 1)}, {p_ + kZ99 * sigma, p_ + kZ99 * sigma},
                           IM_COL32(150, 150, 150, 255), false};
    band_p_ = viz::Series{"p", {0.0, double(kSeeds - 1)}, {p_, p_}, IM_COL32(90, 180, 240, 255), false};

    // The check: the traced output against the float64 reference (1 ulp), and the fast kernels' bits.
    const std::vector<float> got = out_.to_host();
    std::vector<float> ref(static_cast<size_t>(n_));
    rd::reference(hx_.data(), ref.data(), nullptr, n_, p_, seed_);
    int64_t bad = 0, nan = 0;
    for (int64_t i = 0; i < n_; ++i) {
      const float g = got[size_t(i)], r = ref[size_t(i)];
      if (std::isnan(g)) ++nan;
      else if (g != r && std::fabs(double(g) - r) > std::fabs(double(r)) * 1.2e-7) ++bad;
    }
    check_ok_ = bad == 0 && nan == 0;
    check_text_ = check_ok_ ? std::string("yes, every survivor within 1 ulp of relu(x)/(1-p), dropped exactly 0")
                            : "no: " + std::to_string(bad) + " wrong, " + std::to_string(nan) + " never written";
    rd::run_fused(b, x_.data(), fused_.data(), n_, p_, seed_, block_);
    const std::vector<float> f = fused_.to_host();
    rd::run_unfused(b, x_.data(), tmp_.data(), fused_.data(), n_, p_, seed_, block_);
    const std::vector<float> u = fused_.to_host();
    same_ok_ = std::memcmp(f.data(), got.data(), f.size() * 4) == 0 && std::memcmp(u.data(), got.data(), u.size() * 4) == 0;
    same_text_ = same_ok_ ? "yes" : "no";

    // Time, fused against unfused, a few runs each (medians).
    const int iters = b == Backend::Cpu ? 5 : 20;
    t_fused_ = bench::time(b, [&] { rd::run_fused(b, x_.data(), fused_.data(), n_, p_, seed_, block_); }, 2, iters).median_ms;
    t_unfused_ =
        bench::time(b, [&] { rd::run_unfused(b, x_.data(), tmp_.data(), fused_.data(), n_, p_, seed_, block_); }, 2, iters)
            .median_ms;

    // The mask raster: one element per cell, width a power of two near sqrt(n).
    mask_w_ = 1;
    while (int64_t(mask_w_) * mask_w_ < n_) mask_w_ *= 2;
    mask_h_ = int((n_ + mask_w_ - 1) / mask_w_);
    mask_tex_.resize(mask_w_, mask_h_, 2);
    if (b == Backend::Cuda) {
      viz::DataTexture::begin_device_write_all({&mask_tex_});
      try {  // a failure must leave the buffer unmapped, or the next parameter change cannot map it
        rd::mask_cells(b, trace_.keep.data(), n_, mask_w_, mask_h_, mask_tex_.begin_device_write());
      } catch (...) {
        viz::DataTexture::end_device_write_all({&mask_tex_});
        throw;
      }
      viz::DataTexture::end_device_write_all({&mask_tex_});
    } else {
      std::vector<float> cells(size_t(mask_w_) * mask_h_ * 2);
      rd::mask_cells(b, trace_.keep.data(), n_, mask_w_, mask_h_, cells.data());
      mask_tex_.upload(cells.data());
    }
    fresh_ = true;
    valid_ = true;
  }

  ParamValues params_;
  std::string control_error_, run_error_, key_;
  int64_t n_ = 0;
  double p_ = 0.5;
  uint64_t seed_ = 0;
  int block_ = 1024;
  std::vector<float> hx_;
  Buffer<float> x_, out_, fused_, tmp_;
  rd::DropoutTrace trace_;
  viz::DataTexture mask_tex_;
  viz::Heatmap mask_map_;
  int mask_w_ = 1, mask_h_ = 1;
  int64_t dropped_ = 0, survivors_ = 0, off_spike_ = 0;
  double rate_ = 0, t_fused_ = 0, t_unfused_ = 0;
  bool inside_ = false, check_ok_ = false, same_ok_ = false, valid_ = false, fresh_ = false;
  int seeds_inside_ = 0;
  std::string check_text_, same_text_;
  std::vector<viz::Bar> hist_bars_;
  viz::Series rate_series_, band_lo_, band_hi_, band_p_;
};

}  // namespace

std::unique_ptr<Panel> make_relu_dropout_panel() { return std::make_unique<ReluDropoutPanel>(); }

}  // namespace kl::app
