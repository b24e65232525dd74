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
#include "app/panels/memory_access_view.h"
#include "app/notice.h"
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
  SourceFocus source_focus() const override { return {"relu_dropout.cu", {"relu_dropout_traced", "philox_word"}}; }
  std::vector<TourStop> tour_stops() const override {
    return {{"p0.5", {"p=0.5"}}, {"p0.1", {"p=0.1"}}, {"p0.9-n2pow20", {"p=0.9", "n=1048576"}}};
  }
  std::vector<Animation> animations() const override { return {{"p-sweep", "p=0..0.9:0.1", {}, 3}}; }

  // [SECTION] drawing ---------------------------------------------------------------------------------------
  void draw(AppContext& ctx) override {
    const Backend b = ctx.backend.backend;
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
    if (valid_) notice(result_.notice);
    ImGui::PushItemWidth(150);
    ui::param_row(params_, {"n", "p", "seed", "block_size"}, &control_error_);
    ImGui::PopItemWidth();
    ui::error_box(control_error_);
    ui::error_box(run_error_);
    if (!valid_) return;

    const study::ReluDropoutResult& r = result_;
    ui::wrapped(r.formula_line);
    ui::wrapped_dim(r.philox_line);
    // The checks in one line where they pass (a failing one in full): the mask and its rate below stay in
    // sight on a 1280x720 projector; hover the line for every check's sentence.
    std::vector<study::Check> checks = study::relu_dropout_report(r).checks;
    checks.erase(std::remove_if(checks.begin(), checks.end(),
                                [](const study::Check& c) { return c.name == "rate_inside_interval"; }),
                 checks.end());  // drawn beside the rates
    checks_summary(checks);
    // Issue 31: sectors per request of this rung's main loads and stores (app/panels/memory_access_view.h).
    draw_memory_access(ctx.backend.backend, "relu-dropout", params_);

    // The mask beside the statistics where both fit (the mask no taller than the view), else stacked.
    const float avail = ImGui::GetContentRegionAvail().x, gap = ImGui::GetStyle().ItemSpacing.x;
    // Side by side, the mask fits the height left below the checks; stacked, the panel scrolls, so it
    // fits the panel's whole visible height.
    const float window_h = ImGui::GetWindowContentRegionMax().y - ImGui::GetWindowContentRegionMin().y;
    const float view_h = std::max(ui::px(240), ImGui::GetContentRegionAvail().y - ui::px(60));
    const bool side = avail >= ui::px(300) + gap + ui::px(560);
    const float left_w = side ? std::max(ui::px(300), std::min(avail * 0.42f, view_h)) : avail;
    const float right_w = side ? avail - left_w - gap : avail;
    ui::column_begin({side ? 2 : 1, left_w}, 0);
    draw_mask(r, side ? left_w : std::min(avail, std::max(ui::px(240), window_h - ui::px(80))));
    ui::column_end();
    ui::column_begin({side ? 2 : 1, right_w}, 1);
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float fusion_text = ImGui::CalcTextSize(r.fusion_line.c_str(), nullptr, false, right_w).y +
                              ImGui::CalcTextSize(r.gpu_line.c_str(), nullptr, false, right_w).y + line;
    const float room = side ? ImGui::GetContentRegionAvail().y : view_h * 1.5f;
    const float plot_h = std::max(ui::px(140), (room - 8.5f * line - fusion_text) / 3.0f);
    draw_rates(r, right_w, plot_h);
    draw_histogram(r, right_w, plot_h);
    draw_fusion(b, r, right_w, plot_h);
    ui::column_end();
    if (ImGui::CollapsingHeader("Why a random kernel is tested by its distribution")) ui::explain("relu_dropout.md");
  }

 private:
  // The next key item `w` pixels wide goes on the current line, `gap` pixels (at UI scale 1) after the
  // last, where it fits left of `right` (a screen x); else it starts the next line.
  static void next_in_row(float w, float right, float gap) {
    if (ImGui::GetItemRectMax().x + ui::px(gap) + w <= right) ImGui::SameLine(0, ui::px(gap));
  }
  // A colour swatch and its meaning, on the current line unless it does not fit left of `right`.
  static void swatch(const float rgb[3], const char* text, float right, float gap = -1) {
    const float sw = ui::px(14), inner = ui::px(4);
    if (gap >= 0) next_in_row(sw + inner + ImGui::CalcTextSize(text).x, right, gap);
    ImGui::ColorButton(text, ImVec4(rgb[0], rgb[1], rgb[2], 1.0f),
                       ImGuiColorEditFlags_NoTooltip | ImGuiColorEditFlags_NoDragDrop, ImVec2(sw, sw));
    ImGui::SameLine(0, inner);
    ImGui::TextUnformatted(text);
  }
  static void swatch(unsigned col, const char* text, float right, float gap = -1) {
    const ImVec4 c = ImGui::ColorConvertU32ToFloat4(col);
    const float rgb[3] = {c.x, c.y, c.z};
    swatch(rgb, text, right, gap);
  }

  void draw_mask(const study::ReluDropoutResult& r, float left_w) {
    const float right = ImGui::GetCursorScreenPos().x + left_w;
    const std::string title = "Keep mask: " + std::to_string(mask_w_) + " x " + std::to_string(mask_h_) +
                              " elements, row-major (traced kernel)";
    ui::section(title.c_str());
    float kept[3], dropped[3];
    viz::categorical_rgb(kKeptColour, kept);
    viz::categorical_rgb(kDroppedColour, dropped);
    swatch(kept, "kept (u >= p)", right);
    swatch(dropped, "dropped (u < p)", right, 14);
    next_in_row(ImGui::CalcTextSize("hatched: past n").x, right, 14);
    ImGui::TextDisabled("hatched: past n");
    const float img = left_w;
    const float img_h = img * float(mask_h_) / float(mask_w_);
    viz::HeatmapHover h = mask_map_.draw("mask", mask_tex_, ImVec2(img, std::max(ui::px(40), img_h)), fresh_);
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
  }

  void draw_rates(const study::ReluDropoutResult& r, float w, float h) {
    const float right = ImGui::GetCursorScreenPos().x + w;
    ui::section("Drop rate against p");
    ui::wrapped(r.rate_line);
    ui::status_line("this seed's rate inside the interval:", r.rate_inside.sentence, r.rate_inside.pass);
    ui::wrapped_dim(r.seeds_line);
    // The title and key above the plot, so no legend box covers the last seeds' points.
    ui::wrapped(r.rate_title);
    swatch(kRateColour, "per seed", right, 18);
    swatch(kBandColour, "99% interval", right, 18);
    swatch(kPColour, "p", right, 18);
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

  // Fused against unfused: on the CPU backend first that CPU timings do not show what a GPU does, with the
  // H200's recorded figure (the study's line); the bars fused first, as their titles read, and keyed.
  void draw_fusion(Backend b, const study::ReluDropoutResult& r, float w, float h) {
    ui::section(b == Backend::Cpu ? "What fusion saves (CPU figures: not what a GPU does)" : "What fusion saves (measured on the GPU)");
    if (!r.gpu_line.empty()) ui::wrapped_colored(IM_COL32(242, 204, 102, 255), r.gpu_line);
    ui::wrapped_dim(r.fusion_line);
    const float right = ImGui::GetCursorScreenPos().x + w;
    swatch(kFusedColour, "fused: 8 B/elem", right);
    swatch(kUnfusedColour, "unfused: 16 B/elem", right, 14);
    const std::vector<viz::Bar> small = {{"fused", r.t_fused_ms * 1e3, kFusedColour},
                                         {"unfused", r.t_unfused_ms * 1e3, kUnfusedColour}};
    const std::vector<viz::Bar> big = {{"fused", r.t_fused_big_ms, kFusedColour},
                                       {"unfused", r.t_unfused_big_ms, kUnfusedColour}};
    // The two sizes side by side where each chart gets 240 px (at UI scale 1), else one above the other.
    const ui::ColumnsLayout c = ui::columns_or_stack(2, 240.0f);
    const float bh = std::max(ui::px(120), std::min(h, ImGui::GetContentRegionAvail().y - ui::px(4)));
    viz::PlotOptions so;
    so.title = r.time_title;
    ui::column_begin(c, 0);
    viz::bar_chart("times", small, so, ImVec2(c.width, bh));
    ui::column_end();
    viz::PlotOptions bo;
    bo.title = r.big_time_title + " (" + r.big_fused_label.substr(r.big_fused_label.find(", ") + 2) + " fused)";
    ui::column_begin(c, 1);
    viz::bar_chart("times_big", big, bo, ImVec2(c.width, bh));
    ui::column_end();
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
