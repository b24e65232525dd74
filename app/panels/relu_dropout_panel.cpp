// Rung 2 panel: fused ReLU + dropout, read through its statistics. The keep mask the traced kernel
// recorded (as a raster), the empirical drop rate against p with a 99% binomial interval (this seed and
// 24 more), the histogram of survivor/x ratios (one spike at 1/(1-p)), and measured time for fused
// against unfused at two sizes. Every number and sentence comes from kernels/studies/relu_dropout_study.h;
// this file fills the mask texture and draws.
// [SECTION] panel state and parameters
// [SECTION] drawing
// [SECTION] computing (the study runs the kernels; the mask raster is filled on the backend)
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "app/panels/panels.h"
#include "app/ui.h"
#include "kernels/runtime/errors.h"
#include "kernels/rungs/philox.h"
#include "kernels/rungs/relu_dropout.h"
#include "kernels/studies/relu_dropout_study.h"
#include "viz/data_texture.h"
#include "viz/heatmap.h"
#include "viz/plot.h"

namespace kl::app {
namespace {

namespace rd = relu_dropout;
// The mask's two values are palette indices (a binary key, not a colour bar): 1 kept, 0 dropped.
constexpr int kKeptColour = 1, kDroppedColour = 0;
constexpr unsigned kRateColour = IM_COL32(240, 200, 90, 255), kBandColour = IM_COL32(150, 150, 150, 255),
                   kPColour = IM_COL32(90, 180, 240, 255);
constexpr unsigned kFusedColour = IM_COL32(90, 180, 240, 255), kUnfusedColour = IM_COL32(235, 95, 80, 255);

// [SECTION] panel state and parameters ---------------------------------------------------------------------
class ReluDropoutPanel : public Panel {
 public:
  ReluDropoutPanel()
      : params_(study::relu_dropout_params()) {  // the study's list: `study relu-dropout` takes the same
    mask_map_.set_scale({viz::ColorScale::Kind::Categorical, 0.0f, 1.0f, "kept (1) / dropped (0)"});
  }

  std::string id() const override { return "relu-dropout"; }
  std::string title() const override { return "2 · Fused ReLU + dropout"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override { return {"relu_dropout.cu", {"relu_dropout_kernel"}}; }
  std::vector<TourStop> tour_stops() const override {
    return {{"p0.5", {"p=0.5"}}, {"p0.1", {"p=0.1"}}, {"p0.9-n2pow20", {"p=0.9", "n=1048576"}}};
  }
  std::vector<Animation> animations() const override { return {{"p-sweep", "p=0..0.9:0.1", {}, 3}}; }

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

    const study::ReluDropoutResult& r = result_;
    ImGui::TextUnformatted(r.formula_line.c_str());
    ImGui::TextDisabled("%s", r.philox_line.c_str());
    ui::status_line("matches reference:", r.matches_reference.sentence, r.matches_reference.pass);
    ui::status_line("fused == traced == unfused, bit for bit:", r.bit_for_bit.sentence, r.bit_for_bit.pass);
    ImGui::SameLine(0, 24);
    ui::status_line("tie u == p kept:", r.tie_kept.sentence, r.tie_kept.pass);

    const float avail = ImGui::GetContentRegionAvail().x, gap = 16.0f;
    const float left_w = std::min(avail * 0.42f, ImGui::GetContentRegionAvail().y - 60.0f);
    const float right_w = avail - left_w - gap;
    draw_mask(r, left_w);
    ImGui::SameLine(0, gap);
    ImGui::BeginGroup();
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float fusion_text = ImGui::CalcTextSize(r.fusion_line.c_str(), nullptr, false, right_w).y;
    const float plot_h = std::max(80.0f, (ImGui::GetContentRegionAvail().y - 8.5f * line - fusion_text) / 3.0f);
    draw_rates(r, right_w, plot_h);
    draw_histogram(r, right_w, plot_h);
    draw_fusion(b, r, right_w, plot_h, gap);
    ImGui::EndGroup();
  }

 private:
  // A colour swatch and its meaning, on the current line.
  static void swatch(const float rgb[3], const char* text) {
    ImGui::ColorButton(text, ImVec4(rgb[0], rgb[1], rgb[2], 1.0f),
                       ImGuiColorEditFlags_NoTooltip | ImGuiColorEditFlags_NoDragDrop, ImVec2(14, 14));
    ImGui::SameLine(0, 4);
    ImGui::TextUnformatted(text);
  }
  static void swatch(unsigned col, const char* text) {
    const ImVec4 c = ImGui::ColorConvertU32ToFloat4(col);
    const float rgb[3] = {c.x, c.y, c.z};
    swatch(rgb, text);
  }

  void draw_mask(const study::ReluDropoutResult& r, float left_w) {
    ImGui::BeginGroup();
    const std::string title = "Keep mask: " + std::to_string(mask_w_) + " x " + std::to_string(mask_h_) +
                              " elements, row-major (traced kernel)";
    ui::section(title.c_str());
    float kept[3], dropped[3];
    viz::categorical_rgb(kKeptColour, kept);
    viz::categorical_rgb(kDroppedColour, dropped);
    swatch(kept, "kept (u >= p)");
    ImGui::SameLine(0, 14);
    swatch(dropped, "dropped (u < p)");
    ImGui::SameLine(0, 14);
    ImGui::TextDisabled("hatched: past n");
    const float img = left_w;
    const float img_h = img * float(mask_h_) / float(mask_w_);
    viz::HeatmapHover h = mask_map_.draw("mask", mask_tex_, ImVec2(img, std::max(40.0f, img_h)), fresh_);
    fresh_ = false;
    if (h.active) {
      const int64_t i = int64_t(h.row) * mask_w_ + h.col;
      if (i >= 0 && i < r.n) {
        const uint32_t w = philox::element_word(r.seed, uint64_t(i));
        ImGui::SetTooltip("element %" PRId64 "  (pid %" PRId64 ", Philox counter %" PRId64 ", word %d)\n"
                          "u = %.6f  %s  p = %.4g\nx = %.4f", i, i / r.block_size, i / 4, int(i % 4),
                          double(philox::uniform(w)), philox::uniform(w) < r.p ? "<" : ">=", r.p, r.x[size_t(i)]);
      }
    }
    ImGui::EndGroup();
  }

  void draw_rates(const study::ReluDropoutResult& r, float w, float h) {
    ui::section("Drop rate against p");
    ImGui::TextUnformatted(r.rate_line.c_str());
    ui::status_line("this seed's rate inside the interval:", r.rate_inside.sentence, r.rate_inside.pass);
    ImGui::SameLine();
    ImGui::TextDisabled("  %s", r.seeds_line.c_str());
    // The title and key above the plot, so no legend box covers the last seeds' points.
    ImGui::TextUnformatted(r.rate_title.c_str());
    ImGui::SameLine(0, 18);
    swatch(kRateColour, "per seed");
    ImGui::SameLine(0, 18);
    swatch(kBandColour, "99% interval");
    ImGui::SameLine(0, 18);
    swatch(kPColour, "p");
    std::vector<double> xs;
    for (int k = 0; k < study::kDropoutSeeds; ++k) xs.push_back(k);
    const double last = double(study::kDropoutSeeds - 1);
    const std::vector<viz::Series> series = {{"", xs, r.seed_rates, kRateColour, true},
                                             {"", {0.0, last}, {r.lo99, r.lo99}, kBandColour, false},
                                             {"", {0.0, last}, {r.p, r.p}, kPColour, false},
                                             {"", {0.0, last}, {r.hi99, r.hi99}, kBandColour, false}};
    viz::PlotOptions ro;
    ro.x_label = "seed offset";
    ro.y_label = "rate";
    ro.y_min = r.p - 5 * r.sigma;
    ro.y_max = r.p + 5 * r.sigma;
    if (ro.y_min == ro.y_max) ro.y_min -= 0.01, ro.y_max += 0.01;
    viz::line_plot("rates", series, ro, ImVec2(w, h));
  }

  void draw_histogram(const study::ReluDropoutResult& r, float w, float h) {
    ui::section("Survivors: out / x for kept elements with x > 0");
    std::vector<viz::Bar> bars;
    for (size_t k = 0; k < r.hist.size(); ++k) {
      const bool spike = int(k) == r.spike_bin && r.hist[k] > 0;
      bars.push_back({r.bin_labels[k], double(r.hist[k]), spike ? IM_COL32(120, 220, 120, 255) : IM_COL32(140, 140, 150, 255)});
    }
    viz::PlotOptions ho;
    ho.title = r.hist_title;
    ho.x_label = "out / x (bin centres)";
    ho.y_label = "count";
    viz::bar_chart("ratios", bars, ho, ImVec2(w, h));
  }

  void draw_fusion(Backend b, const study::ReluDropoutResult& r, float w, float h, float gap) {
    ui::section(b == Backend::Cpu ? "What fusion saves (CPU backend: CPU figures)" : "What fusion saves (measured on the GPU)");
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextDisabled("%s", r.fusion_line.c_str());
    ImGui::PopTextWrapPos();
    const std::vector<viz::Bar> small = {{"fused, 8 B/elem", r.t_fused_ms * 1e3, kFusedColour},
                                         {"unfused, 16 B/elem", r.t_unfused_ms * 1e3, kUnfusedColour}};
    const std::vector<viz::Bar> big = {{r.big_fused_label, r.t_fused_big_ms, kFusedColour},
                                       {r.big_unfused_label, r.t_unfused_big_ms, kUnfusedColour}};
    const float bw = (w - gap) * 0.5f;
    const float bh = std::max(80.0f, std::min(h, ImGui::GetContentRegionAvail().y - 4.0f));
    viz::PlotOptions so;
    so.title = r.time_title;
    viz::bar_chart("times", small, so, ImVec2(bw, bh));
    ImGui::SameLine(0, gap);
    viz::PlotOptions bo;
    bo.title = r.big_time_title;
    viz::bar_chart("times_big", big, bo, ImVec2(bw, bh));
  }

  // [SECTION] computing ---------------------------------------------------------------------------------------
  void compute(Backend b) {
    valid_ = false;
    result_ = study::run_relu_dropout(b, params_);
    const study::ReluDropoutResult& r = result_;
    // The mask raster: one element per cell, width a power of two near sqrt(n).
    mask_w_ = 1;
    while (int64_t(mask_w_) * mask_w_ < r.n) mask_w_ *= 2;
    mask_h_ = int((r.n + mask_w_ - 1) / mask_w_);
    mask_tex_.resize(mask_w_, mask_h_, 2);
    if (b == Backend::Cuda) {
      viz::DataTexture::begin_device_write_all({&mask_tex_});
      try {  // a failure must leave the buffer unmapped, or the next parameter change cannot map it
        rd::mask_cells(b, r.trace.keep.data(), r.n, mask_w_, mask_h_, mask_tex_.begin_device_write());
      } catch (...) {
        viz::DataTexture::end_device_write_all({&mask_tex_});
        throw;
      }
      viz::DataTexture::end_device_write_all({&mask_tex_});
    } else {
      std::vector<float> cells(size_t(mask_w_) * mask_h_ * 2);
      rd::mask_cells(b, r.trace.keep.data(), r.n, mask_w_, mask_h_, cells.data());
      mask_tex_.upload(cells.data());
    }
    fresh_ = true;
    valid_ = true;
  }

  ParamValues params_;
  std::string control_error_, run_error_, key_;
  study::ReluDropoutResult result_;
  viz::DataTexture mask_tex_;
  viz::Heatmap mask_map_;
  int mask_w_ = 1, mask_h_ = 1;
  bool valid_ = false, fresh_ = false;
};

}  // namespace

std::unique_ptr<Panel> make_relu_dropout_panel() { return std::make_unique<ReluDropoutPanel>(); }

}  // namespace kl::app
