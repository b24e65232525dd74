// Rung 3 panel: "The truncation bug". The buggy (BLOCK_SIZE = 1024) and fixed softmax outputs side by
// side over the same rows, the columns the buggy kernel never wrote drawn from its recorded trace, row
// sums, max abs diff against the float64 reference, and max abs diff over n_cols = 1..8192. A second
// view, "online", shows the running max and running sum chunk by chunk for one row.
// [SECTION] panel state and parameters
// [SECTION] the truncation bug view
// [SECTION] the online view
// [SECTION] computing (kernels run here; textures filled on the backend)
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "app/panels/panels.h"
#include "app/ui.h"
#include "kernels/runtime/errors.h"
#include "kernels/rungs/softmax.h"
#include "viz/data_texture.h"
#include "viz/heatmap.h"
#include "viz/plot.h"

namespace kl::app {
namespace {

using softmax::Variant;
constexpr int64_t kPanelMaxCols = 8192;
constexpr int64_t kPanelMaxRows = 64;
constexpr unsigned kBuggyColour = IM_COL32(235, 95, 80, 255);
constexpr unsigned kFixedColour = IM_COL32(90, 180, 240, 255);
constexpr unsigned kRefColour = IM_COL32(200, 200, 200, 255);

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// [SECTION] panel state and parameters ---------------------------------------------------------------------
class SoftmaxPanel : public Panel {
 public:
  SoftmaxPanel()
      : params_({int_param("n_cols", 1, kPanelMaxCols, 2000, "columns per row (the buggy kernel covers 1024)"),
                 int_param("rows", 1, kPanelMaxRows, 12, "rows of x shown"),
                 int_param("seed", 0, 1 << 30, 1, "seed of the synthetic inputs"),
                 choice_param("view", {"bug", "online"}, "bug", "bug: buggy vs fixed; online: running max/sum"),
                 pow2_param("chunk", softmax::kMinChunk, softmax::kMaxChunk, 256, "online: columns per chunk"),
                 int_param("trace_row", 0, kPanelMaxRows - 1, 0, "online: the row whose chunks are recorded")}) {}

  std::string id() const override { return "softmax"; }
  std::string title() const override { return "3 · Softmax: the truncation bug"; }
  ParamValues& params() override { return params_; }
  SourceFocus source_focus() const override {
    return {"softmax.cu", {"softmax_buggy", "softmax_fixed", "softmax_online_traced"}};
  }
  std::vector<TourStop> tour_stops() const override {
    return {{"bug-n2000", {"n_cols=2000"}},
            {"bug-n1024", {"n_cols=1024"}},
            {"online-n2000", {"view=online", "n_cols=2000", "chunk=256"}}};
  }

  void draw(AppContext& ctx) override {
    const Backend b = ctx.backend.backend;
    ImGui::PushItemWidth(150);
    ui::param_row(params_, {"n_cols", "rows", "seed"}, &control_error_);
    ImGui::PopItemWidth();
    ui::error_box(control_error_);

    const bool want_online = params_.get_text("view") == "online";
    if (ImGui::BeginTabBar("softmax_views")) {
      const bool force = view_forced_ != params_.get_text("view");
      view_forced_ = params_.get_text("view");
      if (ImGui::BeginTabItem("The truncation bug", nullptr,
                              force && !want_online ? ImGuiTabItemFlags_SetSelected : 0)) {
        if (!force && want_online) params_.set("view", "bug"), view_forced_ = "bug";
        draw_bug(b);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Online: running max and sum", nullptr,
                              force && want_online ? ImGuiTabItemFlags_SetSelected : 0)) {
        if (!force && !want_online) params_.set("view", "online"), view_forced_ = "online";
        draw_online(b);
        ImGui::EndTabItem();
      }
      ImGui::EndTabBar();
    }
  }

 private:
  // [SECTION] the truncation bug view ----------------------------------------------------------------------
  void draw_bug(Backend b) {
    const std::string key = ui::settings_key(params_, {"n_cols", "rows", "seed"}, b);
    if (key != bug_key_) {
      bug_key_ = key;
      try {
        compute_bug(b);
        bug_error_.clear();
      } catch (const std::exception& e) {
        bug_error_ = ui::error_text(e);
        bug_valid_ = false;
      }
    }
    ui::error_box(bug_error_);
    if (!bug_valid_) return;
    const int64_t n = n_cols_, rows = rows_;

    // The headline: what the picture shows, in numbers.
    if (n > 1024) {
      ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 150, 130, 255));
      ImGui::TextWrapped("BLOCK_SIZE = 1024 but n_cols = %" PRId64 ": columns 1024..%" PRId64
                  " are never written (%" PRId64 " of %" PRId64 " per row), and the written ones are normalised "
                  "over the first 1024 only.",
                  n, n - 1, n - 1024, n);
      ImGui::PopStyleColor();
    } else {
      ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(140, 220, 140, 255));
      ImGui::TextWrapped("n_cols = %" PRId64 " <= 1024: one BLOCK_SIZE = 1024 program covers the whole row; buggy and "
                  "fixed agree. Push n_cols past 1024 to see the bug.", n);
      ImGui::PopStyleColor();
    }

    // Buggy beside fixed where the panel is wide enough, one above the other where it is not.
    const ui::ColumnsLayout cols = ui::columns_or_stack(2, 340.0f);
    const float half = cols.width;
    const float img_w = half - buggy_map_.colorbar_width();
    const float map_h = std::clamp(float(rows) * 14.0f, 90.0f, 230.0f);
    scale_ = {viz::ColorScale::Kind::Sequential, 0.0f, vmax_, "softmax(x)"};
    buggy_map_.set_scale(scale_);
    fixed_map_.set_scale(scale_);

    ui::column_begin(cols, 0);
    ui::wrapped_colored(IM_COL32(235, 94, 79, 255), "buggy: BLOCK_SIZE = 1024 (fixed constant)");
    viz::HeatmapHover hb = buggy_map_.draw("buggy", buggy_tex_, ImVec2(img_w, map_h), fresh_);
    ImGui::TextDisabled("written (from the trace): columns 0..%" PRId64, std::min<int64_t>(n, 1024) - 1);
    if (n > 1024)
      ui::wrapped_colored(IM_COL32(242, 89, 77, 255), "never written: 1024.." + std::to_string(n - 1) + " (red/black)");
    ui::column_end();
    ui::column_begin(cols, 1);
    ui::wrapped_colored(IM_COL32(89, 179, 240, 255), "fixed: BLOCK_SIZE = next_power_of_2(" + std::to_string(n) +
                                                         ") = " + std::to_string(softmax::block_size(Variant::Fixed, n)));
    viz::HeatmapHover hf = fixed_map_.draw("fixed", fixed_tex_, ImVec2(img_w, map_h), fresh_);
    ImGui::TextWrapped("written (from the trace): all %" PRId64 " columns of every row", n);
    ui::column_end();
    if (hb.active) tooltip(hb.row, hb.col, true);
    if (hf.active) tooltip(hf.row, hf.col, false);
    fresh_ = false;

    ui::status_line("buggy matches reference:", buggy_check_, buggy_ok_);
    ui::status_line("fixed matches reference:", fixed_check_, fixed_ok_);

    // Row sums (left) and the max abs diff over n_cols (right).
    const float plot_h = std::max(170.0f, ImGui::GetContentRegionAvail().y - 8.0f);
    const ui::ColumnsLayout bottom = ui::columns_or_stack(2, 420.0f);
    ImGui::BeginChild("rowsums_col", ImVec2(bottom.width, bottom.per_row == 2 ? plot_h : 0), false,
                      bottom.per_row == 2 ? 0 : ImGuiWindowFlags_AlwaysAutoResize);
    ui::section("Row sums");
    if (ImGui::BeginTable("rowsums", 5, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
      ImGui::TableSetupColumn("row");
      ImGui::TableSetupColumn("buggy, all cols");
      ImGui::TableSetupColumn("buggy, written");
      ImGui::TableSetupColumn("fixed");
      ImGui::TableSetupColumn("ref. mass in 0..1023");
      ui::table_headers_wrapped();
      const int64_t show = std::min<int64_t>(rows, 6);
      for (int64_t r = 0; r < show; ++r) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%" PRId64, r);
        ImGui::TableNextColumn();
        if (std::isnan(sum_buggy_all_[size_t(r)])) ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "NaN (unwritten)");
        else ImGui::Text("%.6f", sum_buggy_all_[size_t(r)]);
        ImGui::TableNextColumn();
        ImGui::Text("%.6f", sum_buggy_written_[size_t(r)]);
        ImGui::TableNextColumn();
        ImGui::Text("%.6f", sum_fixed_[size_t(r)]);
        ImGui::TableNextColumn();
        ImGui::Text("%.6f", ref_head_mass_[size_t(r)]);
      }
      ImGui::EndTable();
    }
    if (n > 1024)
      ImGui::TextWrapped("The buggy row's written entries sum to 1, yet the reference puts only %.1f%% of the "
                         "mass in those columns: every written value is %.2fx too large, and the rest is garbage.",
                         100.0 * ref_head_mass_[0], 1.0 / ref_head_mass_[0]);
    else
      ImGui::TextWrapped("Every row sums to 1 in both kernels.");
    ImGui::Spacing();
    ui::explain("softmax.md");
    ImGui::EndChild();
    if (bottom.per_row == 2) ImGui::SameLine();
    viz::PlotOptions opt;
    opt.title = "max |out - reference| over written columns, n_cols = 1..8192 (4 rows)";
    opt.x_label = "n_cols";
    opt.y_label = "max abs diff";
    opt.log_x = true;
    opt.log_y = true;
    opt.y_min = kDiffFloor;
    opt.y_max = 1e-1;
    opt.v_lines = {1024.0};
    opt.v_line_labels = {"BLOCK_SIZE = 1024"};
    viz::line_plot("sweep", {sweep_buggy_, sweep_fixed_}, opt,
                   ImVec2(bottom.width, bottom.per_row == 2 ? plot_h : std::max(220.0f, bottom.width * 0.5f)));
  }

  void tooltip(int row, int col, bool buggy) {
    if (row < 0 || col < 0 || row >= rows_ || col >= n_cols_) return;
    const size_t i = size_t(row) * size_t(n_cols_) + size_t(col);
    ImGui::BeginTooltip();
    ImGui::Text("row %d (pid %d), column %d   x = %.4f", row, row, col, hx_[i]);
    const float o = buggy ? hb_[i] : hf_[i];
    if (std::isnan(o)) ImGui::TextColored(ImVec4(0.95f, 0.4f, 0.35f, 1), "out = NaN: never written (lane %d >= BLOCK_SIZE)", col);
    else ImGui::Text("out = %.6g   reference = %.6g", o, ref_[i]);
    ImGui::EndTooltip();
  }

  // [SECTION] the online view --------------------------------------------------------------------------------
  void draw_online(Backend b) {
    ImGui::PushItemWidth(150);
    ui::param_row(params_, {"chunk", "trace_row"}, &control_error_);
    ImGui::PopItemWidth();
    const std::string key = ui::settings_key(params_, {"n_cols", "rows", "seed", "chunk", "trace_row"}, b);
    if (key != online_key_) {
      online_key_ = key;
      try {
        compute_online(b);
        online_error_.clear();
      } catch (const std::exception& e) {
        online_error_ = ui::error_text(e);
        online_valid_ = false;
      }
    }
    ui::error_box(online_error_);
    if (!online_valid_) return;
    const int64_t n = on_n_cols_, chunks = int64_t(on_chunk_max_.size());
    ImGui::TextWrapped("One program walks row %" PRId64 " in %" PRId64 " chunks of %d columns, keeping only a running "
                       "max m and a running sum l:  m_new = max(m_old, rowmax(chunk)),  l_new = l_old * exp(m_old - m_new) "
                       "+ rowsum(exp(chunk - m_new)).  A second pass writes exp(x - m) / l.  Any width works: nothing "
                       "holds the whole row.",
                       on_row_, chunks, on_chunk_);
    ui::status_line("online matches reference (this row):", online_check_, online_ok_);

    ui::section("The row, chunk by chunk (synthetic input: a rising wave plus noise)");
    const float avail = ImGui::GetContentRegionAvail().x;
    row_map_.set_scale({viz::ColorScale::Kind::Diverging, -row_absmax_, row_absmax_, "x"});
    row_map_.set_grid(on_chunk_ < n ? on_chunk_ : 0, 0);
    viz::HeatmapHover h = row_map_.draw("row", row_tex_, ImVec2(avail - row_map_.colorbar_width(), 64.0f), on_fresh_);
    on_fresh_ = false;
    if (h.active && h.col >= 0 && h.col < n) {
      const int64_t k = h.col / on_chunk_;
      ImGui::SetTooltip("column %d (chunk %" PRId64 ")  x = %.4f\nafter chunk %" PRId64 ": m = %.4f, l = %.4f", h.col, k,
                        on_row_x_[size_t(h.col)], k, on_running_max_[size_t(k)], on_running_sum_[size_t(k)]);
    }

    const float gap = 16.0f, half = (avail - gap) * 0.5f;
    const float plot_h = std::clamp(ImGui::GetContentRegionAvail().y * 0.5f, 170.0f, 300.0f);
    viz::Series cmax{"rowmax(chunk)", {}, {}, kBuggyColour, true};
    viz::Series rmax{"running max m", {}, {}, kFixedColour, false};
    viz::Series rsum{"running sum l", {}, {}, kFixedColour, false};
    viz::Series full{"sum exp(x - m) so far, float64", {}, {}, kRefColour, true};
    for (int64_t k = 0; k < chunks; ++k) {
      const double xk = double(std::min(n, (k + 1) * int64_t(on_chunk_)));
      cmax.x.push_back(xk), cmax.y.push_back(on_chunk_max_[size_t(k)]);
      rmax.x.push_back(xk), rmax.y.push_back(on_running_max_[size_t(k)]);
      rsum.x.push_back(xk), rsum.y.push_back(on_running_sum_[size_t(k)]);
      full.x.push_back(xk), full.y.push_back(on_ref_sum_[size_t(k)]);
    }
    viz::PlotOptions o1;
    o1.title = "max: the chunk's own and the running m";
    o1.x_label = "columns seen";
    o1.y_label = "x";
    viz::line_plot("maxes", {cmax, rmax}, o1, ImVec2(half, plot_h));
    ImGui::SameLine(0, gap);
    viz::PlotOptions o2;
    o2.title = "running sum l, rescaled whenever m moves";
    o2.x_label = "columns seen";
    o2.y_label = "l";
    viz::line_plot("sums", {rsum, full}, o2, ImVec2(half, plot_h));

    ui::section("Recorded per chunk (from the kernel's trace)");
    if (ImGui::BeginTable("chunks", 6, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY,
                          ImVec2(0, std::max(80.0f, ImGui::GetContentRegionAvail().y - 6.0f)))) {
      ImGui::TableSetupScrollFreeze(0, 1);
      ImGui::TableSetupColumn("chunk");
      ImGui::TableSetupColumn("columns");
      ImGui::TableSetupColumn("rowmax(chunk)");
      ImGui::TableSetupColumn("m after");
      ImGui::TableSetupColumn("exp(m_old - m_new)");
      ImGui::TableSetupColumn("l after");
      ImGui::TableHeadersRow();
      for (int64_t k = 0; k < chunks; ++k) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%" PRId64, k);
        ImGui::TableNextColumn();
        ImGui::Text("%" PRId64 "..%" PRId64, k * on_chunk_, std::min(n, (k + 1) * int64_t(on_chunk_)) - 1);
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", on_chunk_max_[size_t(k)]);
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", on_running_max_[size_t(k)]);
        ImGui::TableNextColumn();
        const float m_old = k ? on_running_max_[size_t(k - 1)] : -std::numeric_limits<float>::infinity();
        const double alpha = k ? std::exp(double(m_old) - on_running_max_[size_t(k)]) : 0.0;
        if (k == 0) ImGui::TextDisabled("(first chunk)");
        else if (alpha < 1.0) ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.35f, 1), "%.4f  (m moved)", alpha);
        else ImGui::Text("1");
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", on_running_sum_[size_t(k)]);
      }
      ImGui::EndTable();
    }
  }

  // [SECTION] computing ----------------------------------------------------------------------------------------
  static constexpr double kDiffFloor = 1e-9;

  void compute_bug(Backend b) {
    bug_valid_ = false;
    n_cols_ = params_.get_int("n_cols");
    rows_ = params_.get_int("rows");
    const int64_t n = n_cols_, rows = rows_, N = n * rows;
    std::mt19937 rng(uint32_t(params_.get_int("seed")));
    std::uniform_real_distribution<float> d(-2.0f, 2.0f);
    hx_.resize(size_t(N));
    for (float& v : hx_) v = d(rng);
    x_.resize(b, size_t(N));
    x_.upload(hx_);
    out_b_.resize(b, size_t(N));
    out_f_.resize(b, size_t(N));
    out_b_.fill_bytes(0xFF);  // poison: NaN wherever no program stores
    out_f_.fill_bytes(0xFF);
    trace_b_.reset(b, rows, n);
    trace_f_.reset(b, rows, n);
    softmax::SoftmaxTraceView tb = trace_b_.view(), tf = trace_f_.view();
    softmax::run(b, Variant::Buggy, x_.data(), out_b_.data(), rows, n, &tb);
    softmax::run(b, Variant::Fixed, x_.data(), out_f_.data(), rows, n, &tf);

    // The checks and sums, on the host against the float64 reference.
    hb_ = out_b_.to_host();
    hf_ = out_f_.to_host();
    const std::vector<int32_t> wb = trace_b_.writer.to_host(), wf = trace_f_.writer.to_host();
    ref_.resize(size_t(N));
    softmax::reference(hx_.data(), ref_.data(), rows, n);
    double diff_b = 0, diff_f = 0;
    int64_t unwritten_b = 0, unwritten_f = 0;
    vmax_ = 0;
    sum_buggy_all_.assign(size_t(rows), 0.0);
    sum_buggy_written_.assign(size_t(rows), 0.0);
    sum_fixed_.assign(size_t(rows), 0.0);
    ref_head_mass_.assign(size_t(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < n; ++c) {
        const size_t i = size_t(r * n + c);
        if (wb[i] < 0) ++unwritten_b;
        else diff_b = std::max(diff_b, std::fabs(double(hb_[i]) - ref_[i])), sum_buggy_written_[size_t(r)] += hb_[i];
        if (wf[i] < 0) ++unwritten_f;
        else diff_f = std::max(diff_f, std::fabs(double(hf_[i]) - ref_[i]));
        sum_buggy_all_[size_t(r)] += hb_[i];  // NaN once any column is unwritten
        sum_fixed_[size_t(r)] += hf_[i];
        if (c < 1024) ref_head_mass_[size_t(r)] += ref_[i];
        if (std::isfinite(hb_[i])) vmax_ = std::max(vmax_, hb_[i]);
        if (std::isfinite(hf_[i])) vmax_ = std::max(vmax_, hf_[i]);
      }
    if (!(vmax_ > 0)) vmax_ = 1;
    char buf[256];
    buggy_ok_ = unwritten_b == 0 && diff_b < 1e-6;
    if (unwritten_b)
      std::snprintf(buf, sizeof buf, "no: %" PRId64 " of %" PRId64 " elements never written (NaN); written ones off by "
                    "up to %.3g (max abs diff)", unwritten_b, N, diff_b);
    else
      std::snprintf(buf, sizeof buf, "%s, max abs diff %.3g", buggy_ok_ ? "yes" : "no", diff_b);
    buggy_check_ = buf;
    fixed_ok_ = unwritten_f == 0 && diff_f < 1e-6;
    std::snprintf(buf, sizeof buf, "%s, max abs diff %.3g, every element written once", fixed_ok_ ? "yes" : "no", diff_f);
    fixed_check_ = buf;

    // The heatmaps: (value, state) cells from the outputs and their recorded writers, on the backend.
    buggy_tex_.resize(int(n), int(rows), 2);
    fixed_tex_.resize(int(n), int(rows), 2);
    if (b == Backend::Cuda) {
      viz::DataTexture::begin_device_write_all({&buggy_tex_, &fixed_tex_});
      try {  // a failure must leave the buffers unmapped, or the next parameter change cannot map them
        softmax::output_cells(b, out_b_.data(), trace_b_.writer.data(), n, 0, rows, buggy_tex_.begin_device_write());
        softmax::output_cells(b, out_f_.data(), trace_f_.writer.data(), n, 0, rows, fixed_tex_.begin_device_write());
      } catch (...) {
        viz::DataTexture::end_device_write_all({&buggy_tex_, &fixed_tex_});
        throw;
      }
      viz::DataTexture::end_device_write_all({&buggy_tex_, &fixed_tex_});
    } else {
      std::vector<float> cells(size_t(N) * 2);
      softmax::output_cells(b, out_b_.data(), trace_b_.writer.data(), n, 0, rows, cells.data());
      buggy_tex_.upload(cells.data());
      softmax::output_cells(b, out_f_.data(), trace_f_.writer.data(), n, 0, rows, cells.data());
      fixed_tex_.upload(cells.data());
    }
    if (sweep_key_ != ui::settings_key(params_, {"seed"}, b)) compute_sweep(b);
    fresh_ = true;
    bug_valid_ = true;
  }

  // max abs diff over the written columns for n_cols from 1 to 8192, 4 rows each, both kernels.
  void compute_sweep(Backend b) {
    sweep_key_ = ui::settings_key(params_, {"seed"}, b);
    sweep_buggy_ = viz::Series{"buggy (BLOCK_SIZE 1024)", {}, {}, kBuggyColour, false};
    sweep_fixed_ = viz::Series{"fixed", {}, {}, kFixedColour, true};
    const int64_t widths[] = {1,   2,    4,    8,    16,   32,   64,   128,  256,  512,  768,  1000, 1023, 1024, 1025,
                              1100, 1280, 1536, 1823, 2000, 2048, 3000, 4096, 5000, 6144, 8192};
    std::mt19937 rng(uint32_t(params_.get_int("seed")) + 7u);
    std::uniform_real_distribution<float> d(-2.0f, 2.0f);
    const int64_t rows = 4;
    for (int64_t n : widths) {
      std::vector<float> x(size_t(rows * n));
      for (float& v : x) v = d(rng);
      std::vector<double> ref(x.size());
      softmax::reference(x.data(), ref.data(), rows, n);
      Buffer<float> dx(b, x.size()), dout(b, x.size());
      dx.upload(x);
      for (Variant v : {Variant::Buggy, Variant::Fixed}) {
        dout.fill_bytes(0xFF);
        softmax::run(b, v, dx.data(), dout.data(), rows, n);
        const std::vector<float> o = dout.to_host();
        double diff = 0;
        for (size_t i = 0; i < o.size(); ++i)
          if (!std::isnan(o[i])) diff = std::max(diff, std::fabs(double(o[i]) - ref[i]));
        viz::Series& s = v == Variant::Buggy ? sweep_buggy_ : sweep_fixed_;
        s.x.push_back(double(n));
        s.y.push_back(std::max(diff, kDiffFloor));
      }
    }
  }

  void compute_online(Backend b) {
    online_valid_ = false;
    const int64_t n = params_.get_int("n_cols");
    const int64_t rows = params_.get_int("rows");
    const int chunk = int(params_.get_int("chunk"));
    const int64_t row = params_.get_int("trace_row");
    if (row >= rows)
      throw InputError(out_of_range_message("trace_row", std::to_string(row), "[0, rows-1] = [0, " +
                                                                                  std::to_string(rows - 1) + "]"));
    // A rising wave plus noise: the running max moves in several chunks, so the rescale is visible.
    std::mt19937 rng(uint32_t(params_.get_int("seed")) + 13u);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> x(size_t(rows * n));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < n; ++c) {
        const double t = n > 1 ? double(c) / double(n - 1) : 0.0;
        x[size_t(r * n + c)] = float(4.0 * t + 1.2 * std::sin(6.0 * 3.14159265 * t + r)) + d(rng);
      }
    on_x_.resize(b, x.size());
    on_x_.upload(x);
    on_out_.resize(b, x.size());
    on_out_.fill_bytes(0xFF);
    on_trace_.reset(b, rows, n, row, chunk);
    softmax::SoftmaxTraceView tv = on_trace_.view();
    softmax::run(b, Variant::Online, on_x_.data(), on_out_.data(), rows, n, &tv, chunk);
    on_chunk_max_ = on_trace_.chunk_max.to_host();
    on_running_max_ = on_trace_.running_max.to_host();
    on_running_sum_ = on_trace_.running_sum.to_host();
    on_n_cols_ = n;
    on_chunk_ = chunk;
    on_row_ = row;
    on_row_x_.assign(x.begin() + row * n, x.begin() + (row + 1) * n);
    row_absmax_ = 0;
    for (float v : on_row_x_) row_absmax_ = std::max(row_absmax_, std::fabs(v));
    // float64: the sum so far relative to the running max after each chunk, and the row's reference.
    on_ref_sum_.assign(on_running_max_.size(), 0.0);
    for (size_t k = 0; k < on_ref_sum_.size(); ++k) {
      double s = 0;
      for (int64_t c = 0; c < std::min(n, int64_t(k + 1) * chunk); ++c) s += std::exp(double(on_row_x_[size_t(c)]) - on_running_max_[k]);
      on_ref_sum_[k] = s;
    }
    std::vector<double> ref(static_cast<size_t>(n));
    softmax::reference(on_row_x_.data(), ref.data(), 1, n);
    std::vector<float> out(static_cast<size_t>(n));
    mem::to_host(b, out.data(), on_out_.data() + row * n, size_t(n) * sizeof(float));
    double diff = 0;
    bool nan = false;
    for (int64_t c = 0; c < n; ++c) {
      nan = nan || std::isnan(out[size_t(c)]);
      diff = std::max(diff, std::fabs(double(out[size_t(c)]) - ref[size_t(c)]));
    }
    online_ok_ = !nan && diff < 1e-6;
    online_check_ = nan ? std::string("no: unwritten elements") : (online_ok_ ? "yes" : "no") + fmt(", max abs diff %.3g", diff);

    row_tex_.resize(int(n), 1, 2);
    if (b == Backend::Cuda) {
      viz::DataTexture::begin_device_write_all({&row_tex_});
      try {  // a failure must leave the buffer unmapped, or the next parameter change cannot map it
        softmax::value_cells(b, on_x_.data() + row * n, n, row_tex_.begin_device_write());
      } catch (...) {
        viz::DataTexture::end_device_write_all({&row_tex_});
        throw;
      }
      viz::DataTexture::end_device_write_all({&row_tex_});
    } else {
      std::vector<float> cells(size_t(n) * 2);
      softmax::value_cells(b, on_x_.data() + row * n, n, cells.data());
      row_tex_.upload(cells.data());
    }
    on_fresh_ = true;
    online_valid_ = true;
  }

  ParamValues params_;
  std::string control_error_, view_forced_;
  // the bug view
  std::string bug_key_, bug_error_, sweep_key_;
  bool bug_valid_ = false, fresh_ = false, buggy_ok_ = false, fixed_ok_ = false;
  int64_t n_cols_ = 0, rows_ = 0;
  std::vector<float> hx_, hb_, hf_;
  std::vector<double> ref_, sum_buggy_all_, sum_buggy_written_, sum_fixed_, ref_head_mass_;
  float vmax_ = 1;
  Buffer<float> x_, out_b_, out_f_;
  softmax::SoftmaxTrace trace_b_, trace_f_;
  viz::DataTexture buggy_tex_, fixed_tex_;
  viz::Heatmap buggy_map_, fixed_map_;
  viz::ColorScale scale_;
  std::string buggy_check_, fixed_check_;
  viz::Series sweep_buggy_, sweep_fixed_;
  // the online view
  std::string online_key_, online_error_, online_check_;
  bool online_valid_ = false, on_fresh_ = false, online_ok_ = false;
  int64_t on_n_cols_ = 0, on_row_ = 0;
  int on_chunk_ = 256;
  Buffer<float> on_x_, on_out_;
  softmax::SoftmaxTrace on_trace_;
  std::vector<float> on_chunk_max_, on_running_max_, on_running_sum_, on_row_x_;
  std::vector<double> on_ref_sum_;
  float row_absmax_ = 1;
  viz::DataTexture row_tex_;
  viz::Heatmap row_map_;
};

}  // namespace

std::unique_ptr<Panel> make_softmax_panel() { return std::make_unique<SoftmaxPanel>(); }

}  // namespace kl::app
