// The Measure view: the rungs' kernels against ceilings measured in the same run (kernels/measure/measure.h).
// Runs on a background thread (measure::Worker) with a progress bar and a cancel button; with run=1 it
// measures synchronously before drawing (shots, the tour). The notice line (kernels/studies/measure_study.h)
// over tabs: fused against unfused as bars beside the achieved GB/s against size (log) with the copy
// ceiling; FlashAttention against the GEMM ceiling; the ratio table; "Peers (recorded)": the recorded
// results of a GPU session (kernels/measure/peers.h, embedded at build time: the table the README shows),
// the ladder's figures beside its peers' with the ratios coloured ahead/behind, and this run's figure beside
// the recorded one where the shape matches. On the CPU backend each timing view says that CPU timings do not
// show what a GPU does, with the H200's recorded figures. Export as JSON and CSV (app/measure_export.h).
// [SECTION] panel state and parameters
// [SECTION] controls, progress and export
// [SECTION] plots
// [SECTION] the recorded peers
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "app/measure_export.h"
#include "app/panels/panels.h"
#include "app/notice.h"
#include "app/ui.h"
#include "kernels/runtime/errors.h"
#include "kernels/measure/measure.h"
#include "kernels/measure/peers.h"
#include "kernels/studies/measure_study.h"
#include "viz/plot.h"
#include "viz/ui_log.h"

namespace kl::app {
namespace {

const unsigned kBlue = IM_COL32(90, 180, 240, 255), kGreen = IM_COL32(120, 215, 120, 255),
               kOrange = IM_COL32(240, 165, 70, 255), kPurple = IM_COL32(190, 140, 240, 255),
               kCeiling = IM_COL32(235, 235, 235, 255), kUnfused = IM_COL32(150, 150, 160, 255);

std::string fmt(const char* f, double v) {
  char b[96];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string pow2(double n) {
  const double e = std::log2(n);
  return std::fabs(e - std::round(e)) < 1e-9 ? "2^" + std::to_string(int(std::round(e))) : fmt("%.0f", n);
}

// The bandwidth sizes measured so far, ascending (the plot's x ticks).
std::vector<int64_t> measured_sizes(const measure::Results& r) {
  std::vector<int64_t> n;
  for (const measure::Point& p : r.points)
    if (p.section == "bandwidth" && std::find(n.begin(), n.end(), int64_t(p.size)) == n.end()) n.push_back(int64_t(p.size));
  std::sort(n.begin(), n.end());
  return n;
}

// [SECTION] panel state and parameters ---------------------------------------------------------------------
class MeasurePanel : public Panel {
 public:
  // The parameters are declared once, in kernels/measure/measure.h (`measure --quick` shares quick's); the
  // panel adds its tab (`--set view=flash` opens FlashAttention's, as on rungs 5 and 6).
  static std::vector<ParamSpec> panel_params() {
    std::vector<ParamSpec> p = measure::params();
    p.push_back(choice_param("view", {"fusion", "flash", "ceiling", "peers"}, "fusion",
                             "the panel's view: fusion and bandwidth, FlashAttention against the GEMM, the ceiling "
                             "and ratio table, the recorded peers"));
    return p;
  }
  MeasurePanel() : params_(panel_params()) {
    std::snprintf(prefix_, sizeof prefix_, "%s", "kernel-ladder-measure");
  }

  std::string id() const override { return "measure"; }
  std::string title() const override { return "Measure"; }
  ParamValues& params() override { return params_; }
  std::vector<TourStop> tour_stops() const override { return {{"quick", {"run=1", "quick=1"}}}; }

  // Laid out for a 1280x720 projector: the notice line (from the run: kernels/studies/measure_study.h), the
  // controls and the machine, then tabs: fusion and bandwidth (what the notice talks about), FlashAttention
  // against the GEMM, the ratio table, the recorded peers (the `view` parameter). Another view is one more
  // tabs.item() block.
  void draw(AppContext& ctx) override {
    const Backend b = ctx.backend.backend;
    if (params_.get_bool("run") && !sync_done_ && !worker_.running()) {
      // Shots and the tour: the whole measurement before the first frame is drawn.
      sync_done_ = true;
      const auto t0 = std::chrono::steady_clock::now();
      results_ = measure::run(options(b));
      seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (worker_.running() || polling_) {
      ui::keep_drawing(0.1);  // the progress bar moves without input
      results_ = worker_.snapshot();
      if (!worker_.running()) {
        polling_ = false;
        results_ = worker_.snapshot();
        seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
      }
    }
    // On the Peers tab the line says what the record shows; elsewhere what this run found (or what Run does).
    notice(params_.get_text("view") == "peers" ? peers::notice(peers::embedded()) : study::measure_notice(results_));
    draw_controls(b);
    ui::error_box(results_.error);
    if (!results_.points.empty()) draw_machine();
    ViewTabs tabs("measure-views", params_, "view", view_forced_);
    if (tabs.item("Fusion", "fusion")) {
      // Before a run the recorded H200 figures are what there is to see (the Peers tab's), under the line
      // that says what Run does.
      if (has_points()) draw_fusion_and_bandwidth();
      else draw_recorded_peers();
      tabs.end_item();
    }
    if (tabs.item("FlashAttention", "flash")) {
      if (has_points()) draw_compute();
      tabs.end_item();
    }
    if (tabs.item("Ceiling", "ceiling")) {
      if (has_points()) draw_ceiling_tab();
      tabs.end_item();
    }
    if (tabs.item("Peers", "peers")) {
      draw_recorded_peers();
      tabs.end_item();
    }
    tabs.end();
    if (ImGui::CollapsingHeader("What is measured, and against what")) ui::explain("measure.md");
  }

 private:
  measure::Options options(Backend b) const {
    measure::Options o;
    o.backend = b;
    o.quick = params_.get_bool("quick");
    return o;
  }

  // [SECTION] controls, progress and export -----------------------------------------------------------------
  // On the line of the previous item when `w` more pixels fit there, else on the next line: the
  // controls wrap instead of running off the panel's right edge.
  static void same_line_if_fits(float w, float spacing) {
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (ImGui::GetItemRectMax().x + spacing + w <= right) ImGui::SameLine(0, spacing);
  }
  static float button_width(const char* label) {
    return ImGui::CalcTextSize(label, nullptr, true).x + 2.0f * ImGui::GetStyle().FramePadding.x;
  }

  void draw_controls(Backend b) {
    const bool running = worker_.running();
    const float sp = ImGui::GetStyle().ItemSpacing.x;
    ui::param_control(params_, "quick", &control_error_);
    same_line_if_fits(button_width(running ? "Cancel" : "Run"), sp);
    if (!running) {
      const bool run = ImGui::Button("Run");
      viz::ui_log::place("button", "measure run", ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y,
                         ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y);
      if (run) {
        worker_.start(options(b));
        started_ = std::chrono::steady_clock::now();
        polling_ = true;
        message_.clear();
      }
    } else if (ImGui::Button("Cancel")) {
      worker_.cancel();
    }
    const measure::Results& r = results_;
    std::string overlay;
    float frac = 0;
    if (running) {
      frac = r.steps_total ? float(r.steps_done) / float(r.steps_total) : 0.0f;
      overlay = std::to_string(r.steps_done) + " / " + std::to_string(r.steps_total) + ": " + worker_.current();
    } else if (r.steps_total) {
      frac = float(r.steps_done) / float(r.steps_total);
      overlay = r.finished ? "done: " + std::to_string(r.steps_done) + " measurements in " + fmt("%.2f s", seconds_)
                : r.cancelled ? "cancelled after " + std::to_string(r.steps_done) + " of " + std::to_string(r.steps_total)
                              : "stopped after " + std::to_string(r.steps_done) + " of " + std::to_string(r.steps_total);
    } else {
      overlay = "not run";
    }
    // As wide as its text needs (and no wider than the panel), up to 520 px at scale 1.
    const float full = ImGui::GetContentRegionAvail().x;
    const float bar_w = std::min(full, std::max(ImGui::CalcTextSize(overlay.c_str()).x + ui::px(16.0f),
                                                std::min(ui::px(520.0f), full * 0.35f)));
    same_line_if_fits(bar_w, sp);
    ImGui::ProgressBar(frac, ImVec2(bar_w, 0), overlay.c_str());
    const float prefix_w = std::min(full, ui::px(200.0f));
    same_line_if_fits(prefix_w, ui::px(24.0f));
    ImGui::SetNextItemWidth(prefix_w);
    ImGui::InputText("##prefix", prefix_, sizeof prefix_);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("file name without extension, in the working directory");
    const bool can_export = !running && !r.points.empty();
    if (!can_export) ImGui::BeginDisabled();
    same_line_if_fits(button_width("Export JSON"), sp);
    if (ImGui::Button("Export JSON")) export_file(".json");
    viz::ui_log::place("button", "measure export-json", ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y,
                       ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y);
    same_line_if_fits(button_width("Export CSV"), sp);
    if (ImGui::Button("Export CSV")) export_file(".csv");
    if (!can_export) ImGui::EndDisabled();
    ui::error_box(control_error_);
    if (!message_.empty()) ui::note(ImGui::GetColorU32(ImGuiCol_TextDisabled), message_);
  }

  void export_file(const std::string& ext) {
    const std::string path = std::string(prefix_) + ext;
    try {
      write_text_file(path, ext == ".json" ? measure_json(results_) : measure_csv(results_), "export");
      char* abs = ::realpath(path.c_str(), nullptr);  // the folder named: the working one is not obvious
      message_ = "wrote " + std::string(abs ? abs : path.c_str());
      std::free(abs);
    } catch (const std::exception& e) {
      message_ = e.what();
    }
  }

  // Before a run, what Run does (in a tab, not the notice's place).
  bool has_points() const {
    if (!results_.points.empty()) return true;
    ui::wrapped_dim("No measurement yet. Run measures every kernel against the ceilings (quick: a few seconds).");
    return false;
  }

  // One line of where the numbers came from; the ceilings, the cold timing and the launch cost are in the
  // ratio table's tab.
  void draw_machine() {
    const measure::Machine& m = results_.machine;
    ui::wrapped_dim(m.device + "  |  " + m.backend + " backend  |  " + m.date + (m.quick ? "  |  quick sizes" : ""));
    if (m.cpu_figures) ui::note(IM_COL32(242, 204, 102, 255), noise_sentence());
  }

  // On the CPU backend, over each timing view: CPU timings do not show what a GPU does, with the H200's
  // recorded figures (the study's sentence), in the caution colour.
  static void cpu_caution(const std::string& line) {
    if (!line.empty()) ui::wrapped_colored(IM_COL32(242, 204, 102, 255), line);
  }

  // CPU timings swing from run to run (other programs on the cores, frequency, caches): said always on
  // the CPU, and with the figure that shows it where a kernel reads as faster than its own ceiling.
  std::string noise_sentence() const {
    const measure::Point* worst = nullptr;
    for (const measure::Point& p : results_.points)
      if (p.section == "bandwidth" && p.kernel != "copy" && p.ratio > 1.0 && (!worst || p.ratio > worst->ratio)) worst = &p;
    std::string s = "Timings on a shared CPU are noisy: the same run can give the copy ceiling several times another "
                    "GB/s, so compare figures within one run and run again before trusting a ratio.";
    if (worst)
      s += " Here " + worst->kernel + " " + worst->variant + " reads " + fmt("%.2f", worst->ratio) +
           " of the copy at " + pow2(worst->size) + " elements: faster than the ceiling it is measured against, which is noise, not speed.";
    return s;
  }

  // TFLOP/s on the GPU, GFLOP/s on the CPU (where TFLOP/s would read 0.00).
  double flops_unit() const { return results_.machine.cpu_figures ? 1e3 : 1.0; }
  std::string flops_text(double tflops) const {
    return results_.machine.cpu_figures ? fmt("%.2f GFLOP/s", tflops * 1e3) : fmt("%.0f TFLOP/s", tflops);
  }

  // [SECTION] plots -------------------------------------------------------------------------------------
  // The fusion bars (fused first, as the title reads: "fused 1.28x faster"; keyed) beside the bandwidth
  // against size on a log axis (the CPU's few GB/s lay on 0 of a linear one), each as tall as the view
  // leaves; stacked where the panel is narrow.
  void draw_fusion_and_bandwidth() {
    const measure::Results& r = results_;
    cpu_caution(study::measure_cpu_line(r));
    const float gap = ImGui::GetStyle().ItemSpacing.x;
    const float avail_w = ImGui::GetContentRegionAvail().x;
    const bool beside = avail_w >= ui::px(760.0f);
    const float left_w = beside ? std::floor((avail_w - gap) * 0.45f) : avail_w;
    const float right_w = beside ? avail_w - left_w - gap : avail_w;
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float h = std::clamp(ImGui::GetContentRegionAvail().y - 2.0f * line - ui::px(8), ui::px(200.0f), ui::px(420.0f));
    draw_fusion_bars(left_w, h);
    if (beside) ImGui::SameLine(0, gap);
    draw_bandwidth_plot(ImVec2(right_w, h + line));
  }

  // (b) fused against unfused: time at the largest size both were measured at, one chart `h` tall per pair,
  // side by side in `width` under their colour key.
  void draw_fusion_bars(float width, float h) {
    const measure::Results& r = results_;
    const float gap = ImGui::GetStyle().ItemSpacing.x;
    ImGui::BeginGroup();
    const std::vector<FusionPair> pairs = fusion_pairs(r);
    draw_fusion_key(width);
    const size_t n_bars = std::max<size_t>(1, pairs.size());
    const float bar_w = std::floor((width - gap * float(n_bars - 1)) / float(n_bars));
    for (size_t i = 0; i < pairs.size(); ++i) {
      const FusionPair& f = pairs[i];
      if (i) ImGui::SameLine(0, gap);
      const bool us = f.fused_ms < 1.0;
      const double k = us ? 1e3 : 1.0;
      const unsigned col = f.kernel == "softmax" ? kOrange : kGreen;
      const bool soft = f.kernel == "softmax";
      std::vector<viz::Bar> bars = {{soft ? "1 pass" : "fused", f.fused_ms * k, col},
                                    {soft ? "3 pass" : "unfused", f.unfused_ms * k, kUnfused}};
      viz::PlotOptions bo;
      // Two lines: a wrap could split "1.01x" at its point.
      bo.title = std::string(soft ? "softmax" : "ReLU+dropout") + ", N=" + pow2(f.size) + "\n" +
                 (soft ? "1 pass " : "fused ") +
                 (f.speedup() >= 1.0 ? fmt("%.2fx faster", f.speedup()) : fmt("%.2fx slower", 1.0 / f.speedup())) +
                 (f.launch_bound ? " (launch-bound)" : "");
      bo.y_label = us ? "us per call" : "ms per call";
      ImGui::PushID(int(i));
      viz::bar_chart("fusion", bars, bo, ImVec2(bar_w, h));
      ImGui::PopID();
    }
    ImGui::EndGroup();
  }

  // (a) bandwidth against size, the copy as the ceiling, `size` large.
  void draw_bandwidth_plot(ImVec2 size) {
    const measure::Results& r = results_;
    const bool cpu = r.machine.cpu_figures;
    ImGui::BeginGroup();
    struct Style {
      const char *kernel, *variant, *label;
      unsigned color;
      bool points;
    };
    // The copy last and as dots, so that it shows on top of the fused line it runs beside.
    const Style styles[] = {
        {"vector-add", "fast", "vector add, 12 B", kBlue, false},
        {"relu-dropout", "fused", "ReLU+dropout fused, 8 B", kGreen, false},
        {"relu-dropout", "unfused", "unfused, 16 B (dots)", kGreen, true},
        {"softmax", "fixed", "softmax one pass, 8 B", kOrange, false},
        {"softmax", "three_pass", "three_pass, 20 B (dots)", kOrange, true},
        {"copy", cpu ? "memcpy" : "d2d", cpu ? "memcpy (ceiling)" : "copy (ceiling)", kCeiling, true}};
    // x is log2 N on a linear axis: one tick per power of two measured (a log axis would tick decades only).
    std::vector<viz::Series> bw;
    for (const Style& s : styles) {
      viz::Series se{s.label, {}, {}, s.color, s.points};
      for (const measure::Point& p : r.points)
        if (p.kernel == s.kernel && p.variant == s.variant) se.x.push_back(std::log2(p.size)), se.y.push_back(p.gbs);
      if (!se.x.empty()) bw.push_back(se);
    }
    viz::PlotOptions ao;
    ao.title = cpu ? "GB/s (CPU) = bytes moved / median time" : "GB/s = bytes moved / median time, timed cold";
    ao.x_label = "log2 N: N = 2^x fp32 elements (" + pow2(bw.empty() ? 1 : std::exp2(bw[0].x.front())) + " .. " +
                 pow2(r.largest_size("bandwidth")) + ")";
    ao.y_label = "GB/s (log scale)";
    ao.log_y = true;  // the series span decades: on a linear axis the slow ones lie on 0
    for (int64_t n : measured_sizes(r)) ao.x_ticks.push_back(std::log2(double(n)));
    const double launch_upto = measure::launch_bound_up_to(r);
    if (launch_upto > 0) {
      ao.v_lines = {std::log2(launch_upto)};
      ao.v_line_labels = {"<- launch-bound"};
    }
    viz::line_plot("bandwidth", bw, ao, size);
    ImGui::EndGroup();
  }

  // The bars' colour key: the fused kernel in its family's colour, the unfused one grey.
  void draw_fusion_key(float width) {
    const float right = ImGui::GetCursorScreenPos().x + width;
    const float sw = ui::px(14), inner = ui::px(4);
    bool first = true;
    for (const auto& [c, text] : {std::pair<unsigned, const char*>{kGreen, "ReLU + dropout fused, 8 B/elem"},
                                  {kOrange, "softmax one pass, 8 B"}, {kUnfused, "unfused 16 B / three passes 20 B"}}) {
      const float w = sw + inner + ImGui::CalcTextSize(text).x;
      if (!first && ImGui::GetItemRectMax().x + ui::px(12) + w <= right) ImGui::SameLine(0, ui::px(12));
      first = false;
      const ImVec4 cc = ImGui::ColorConvertU32ToFloat4(c);
      ImGui::ColorButton(text, cc, ImGuiColorEditFlags_NoTooltip | ImGuiColorEditFlags_NoDragDrop, ImVec2(sw, sw));
      ImGui::SameLine(0, inner);
      ImGui::TextUnformatted(text);
    }
  }

  // (c) FlashAttention against the GEMM ceiling, as tall as the view leaves (its x label in sight).
  void draw_compute() {
    const measure::Results& r = results_;
    const bool cpu = r.machine.cpu_figures;
    cpu_caution(study::measure_cpu_flash_line(r));
    std::map<std::string, viz::Series> by_variant;
    double lmin = 1e30, lmax = 0;
    for (const measure::Point& p : r.points) {
      if (p.section != "compute") continue;
      viz::Series& s = by_variant[p.variant];
      s.label = "flash " + p.variant;
      s.x.push_back(p.size), s.y.push_back(p.tflops * flops_unit());
      lmin = std::min(lmin, p.size), lmax = std::max(lmax, p.size);
    }
    // One hue per head dimension; causal runs as dots of the same hue (as unfused runs are above).
    std::vector<viz::Series> cs;
    for (auto& [name, s] : by_variant) {
      s.color = name.find("d=128") != std::string::npos ? kPurple : kBlue;
      s.points = name.find("causal") != std::string::npos;
      cs.push_back(s);
    }
    if (r.machine.gemm_tflops > 0 && lmax > 0)
      cs.insert(cs.begin(), viz::Series{cpu ? "CPU GEMM (ceiling)" : "cuBLAS bf16 GEMM (ceiling)",
                                        {lmin, lmax},
                                        {r.machine.gemm_tflops * flops_unit(), r.machine.gemm_tflops * flops_unit()},
                                        kCeiling,
                                        false});
    viz::PlotOptions co;
    co.title = cpu ? "GFLOP/s (CPU) = 4 B H L^2 d / median time" : "TFLOP/s = 4 B H L^2 d (x 1/2 causal) / median time";
    co.x_label = "sequence length L (log scale)";
    co.y_label = cpu ? "GFLOP/s" : "TFLOP/s";
    co.log_x = true;
    for (const auto& [name, s] : by_variant)  // a tick at every length measured
      for (double x : s.x)
        if (std::find(co.x_ticks.begin(), co.x_ticks.end(), x) == co.x_ticks.end()) co.x_ticks.push_back(x);
    std::sort(co.x_ticks.begin(), co.x_ticks.end());
    double ymax = r.machine.gemm_tflops * flops_unit();
    for (const viz::Series& s : cs)
      for (double v : s.y) ymax = std::max(ymax, v);
    co.y_min = 0, co.y_max = ymax > 0 ? ymax * 1.1 : 1.0;  // from 0: the gap to the ceiling at its true size
    if (cs.empty()) {
      ImGui::TextDisabled("not measured yet");
      return;
    }
    const float h = std::clamp(ImGui::GetContentRegionAvail().y - ui::px(6), ui::px(200.0f), ui::px(460.0f));
    viz::line_plot("compute", cs, co, ImVec2(ImGui::GetContentRegionAvail().x, h));
  }

  // (d) the ratios at the largest size, with the ceilings, the cold timing and the launch cost.
  void draw_ceiling_tab() {
    const std::vector<TableRow> rows = table_rows();
    const std::string ceilings = measure::ceilings_sentence(results_);
    // Between words only (ui::wrapped_dim): these sentences are mostly numbers ("3.01 TB/s").
    if (!ceilings.empty()) ui::wrapped_dim("ceilings measured in this run: " + ceilings);
    ui::wrapped_dim(measure::cold_sentence(results_));
    const std::string launch = measure::launch_sentence(results_);
    if (!launch.empty()) ui::wrapped_dim(launch);
    draw_table(rows, std::min(ImGui::GetContentRegionAvail().x, std::max(table_width(rows), ui::px(340.0f))));
  }

  // One row of the ratio table: the texts it shows and the verdict that colours them.
  struct TableRow {
    std::string cells[4];  // kernel, size, achieved, of ceiling
    measure::Verdict verdict;
  };
  static constexpr const char* kHeaders[5] = {"kernel", "size", "achieved", "of ceiling", "reads as"};

  std::vector<TableRow> table_rows() const {
    const measure::Results& r = results_;
    std::vector<TableRow> rows;
    auto add = [&rows](const std::string& name, const std::string& size, const std::string& value, const measure::Point& p) {
      rows.push_back({{name, size, value, fmt(p.ratio >= 0.1 ? "%.2f" : "%.3f", p.ratio)}, measure::verdict(p)});
    };
    const double nmax = r.largest_size("bandwidth");
    for (const measure::Point& p : r.points)
      if (p.section == "bandwidth" && p.size == nmax && p.kernel != "copy")
        add(p.kernel + " " + p.variant, pow2(p.size), fmt(p.gbs >= 100 ? "%.0f GB/s" : "%.3g GB/s", p.gbs), p);
    // Each FlashAttention variant at its largest length, as the plot's right end (the table says "at the
    // largest size").
    std::map<std::string, const measure::Point*> best;
    for (const measure::Point& p : r.points)
      if (p.section == "compute" && (!best[p.variant] || p.size > best[p.variant]->size)) best[p.variant] = &p;
    for (const auto& [v, p] : best)
      if (p) add("flash " + v, "L=" + fmt("%.0f", p->size), flops_text(p->tflops), *p);
    return rows;
  }

  // The widest text of each column (its header included), plus the cells' padding.
  static std::vector<float> column_widths(const std::vector<TableRow>& rows) {
    std::vector<float> w(5, 0.0f);
    for (int c = 0; c < 5; ++c) w[size_t(c)] = ImGui::CalcTextSize(kHeaders[c]).x;
    for (const TableRow& row : rows) {
      for (int c = 0; c < 4; ++c) w[size_t(c)] = std::max(w[size_t(c)], ImGui::CalcTextSize(row.cells[c].c_str()).x);
      w[4] = std::max(w[4], ImGui::CalcTextSize(measure::verdict_name(row.verdict)).x);
    }
    for (float& x : w) x += 2.0f * ImGui::GetStyle().CellPadding.x + 1.0f;
    return w;
  }
  static float table_width(const std::vector<TableRow>& rows) {
    float sum = 0;
    for (float x : column_widths(rows)) sum += x;
    return sum;
  }

  // The rows in the event log on each change ("row measure flash fast d=64 | L=1024 | ..."), for a test
  // that holds the table to the plots.
  static void log_rows(const std::vector<TableRow>& rows) {
    if (!viz::ui_log::is_open()) return;
    std::string all;
    for (const TableRow& r : rows) all += "row measure " + r.cells[0] + " | " + r.cells[1] + " | " + r.cells[2] + "\n";
    static std::string logged;
    if (all == logged || all.empty()) return;
    logged = all;
    all.pop_back();
    viz::ui_log::event(all);
  }

  // Columns share the width in proportion to their widest text, so where the table is as wide as
  // table_width() nothing wraps; narrower (stacked on a small panel), the cells wrap, never cut. As tall
  // as its rows (a handful): the panel scrolls, not the table.
  void draw_table(const std::vector<TableRow>& rows, float w) {
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_SizingStretchProp;
    if (!ImGui::BeginTable("ratios", 5, flags, ImVec2(w, 0))) return;
    const std::vector<float> cw = column_widths(rows);
    for (int c = 0; c < 5; ++c) ImGui::TableSetupColumn(kHeaders[c], ImGuiTableColumnFlags_WidthStretch, cw[size_t(c)]);
    ui::table_headers_wrapped();
    log_rows(rows);
    for (const TableRow& row : rows) {
      ImGui::TableNextRow();
      for (int c = 0; c < 5; ++c) {
        ImGui::TableSetColumnIndex(c);
        const char* text = c < 4 ? row.cells[c].c_str() : measure::verdict_name(row.verdict);
        if (c >= 3) ImGui::PushStyleColor(ImGuiCol_Text, verdict_colour(row.verdict));
        ui::wrapped(text);
        if (c >= 3) ImGui::PopStyleColor();
      }
    }
    ImGui::EndTable();
  }

  // [SECTION] the recorded peers --------------------------------------------------------------------------
  void draw_recorded_peers() {
    const peers::Recorded* rec = nullptr;
    try {
      rec = &peers::embedded();
    } catch (const std::exception& e) {  // the build and a test check the file; this is the last guard
      ui::error_box(ui::error_text(e));
      return;
    }
    ui::wrapped(peers::caption(*rec));
    ui::wrapped_dim("Harness: " + rec->harness + ". Ratios: the ladder's figure over the peer's; green: 1.00 or more "
                        "(ahead), red: below (behind).");
    for (size_t i = 0; i < rec->sections.size(); ++i) {
      ImGui::PushID(int(i));
      draw_peer_table(rec->sections[i], peers::live_ladder(rec->sections[i], results_));
      ImGui::PopID();
    }
  }

  // One cell of a peers table: its text and colour (0: the default).
  struct PeerCell {
    std::string text;
    unsigned colour = 0;
  };

  // Columns as wide as their widest text; as tall as its rows up to half the view, then it scrolls (the
  // header and the shape column stay); narrower than its columns, it scrolls sideways.
  void draw_peer_table(const peers::Section& s, const std::vector<std::optional<double>>& live) {
    const bool has_live = std::any_of(live.begin(), live.end(), [](const std::optional<double>& v) { return bool(v); });
    ImGui::Spacing();
    ui::wrapped(s.title + " (" + s.unit + ")");
    if (!s.note.empty()) ui::wrapped_dim(s.note);
    std::vector<std::string> headers = {"shape"};
    for (const peers::Column& c : s.columns) headers.push_back(c.name);
    const std::vector<size_t> peer_cols = s.peer_columns();
    for (size_t p : peer_cols) headers.push_back("/" + s.columns[p].short_name);
    if (has_live) headers.push_back("live (this run)");
    std::vector<std::vector<PeerCell>> cells;
    for (size_t r = 0; r < s.rows.size(); ++r) {
      const peers::Row& row = s.rows[r];
      std::vector<PeerCell> line = {{peers::short_shape(row)}};
      for (size_t c = 0; c < s.columns.size(); ++c) line.push_back({peers::format_value(s, row.values[c])});
      for (size_t p : peer_cols) {
        const std::optional<double> q = peers::ratio(row, p);
        line.push_back({peers::format_ratio(s, q), q ? standing_colour(*q, s.ratio_digits) : 0u});
      }
      if (has_live) line.push_back({live[r] ? fmt("%.1f", *live[r]) : "-"});
      cells.push_back(std::move(line));
    }
    const ImGuiStyle& st = ImGui::GetStyle();
    std::vector<float> w(headers.size());
    for (size_t c = 0; c < headers.size(); ++c) {
      w[c] = ImGui::CalcTextSize(headers[c].c_str()).x;
      for (const auto& line : cells) w[c] = std::max(w[c], ImGui::CalcTextSize(line[c].text.c_str()).x);
    }
    float total = 0;
    for (float x : w) total += x + 2.0f * st.CellPadding.x + 1.0f;
    const float row_h = ImGui::GetTextLineHeight() + 2.0f * st.CellPadding.y;
    const int max_rows = std::max(6, int(std::floor(ImGui::GetWindowHeight() * 0.5f / row_h)) - 1);
    const int shown = std::min(int(cells.size()), max_rows);
    const bool scrolls_y = int(cells.size()) > shown;
    const float avail = ImGui::GetContentRegionAvail().x;
    const float width = std::min(avail, total + (scrolls_y ? st.ScrollbarSize : 0.0f) + ui::px(4.0f));
    const bool scrolls_x = width < total + (scrolls_y ? st.ScrollbarSize : 0.0f);
    // A table that scrolls is a child window; one that does not is drawn in the view itself, which scrolls
    // (so a short table at the view's bottom edge is read by scrolling the view, not cut).
    const bool scrolls = scrolls_y || scrolls_x;
    const float height = scrolls ? float(shown + 1) * row_h + ui::px(4.0f) + (scrolls_x ? st.ScrollbarSize : 0.0f) : 0.0f;
    ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_BordersOuter |
                            ImGuiTableFlags_SizingFixedFit;
    if (scrolls) flags |= ImGuiTableFlags_ScrollX | ImGuiTableFlags_ScrollY;
    if (!ImGui::BeginTable("peers", int(headers.size()), flags, ImVec2(width, height))) return;
    if (scrolls) ImGui::TableSetupScrollFreeze(1, 1);
    for (size_t c = 0; c < headers.size(); ++c)
      ImGui::TableSetupColumn(headers[c].c_str(), ImGuiTableColumnFlags_WidthFixed, w[c]);
    ImGui::TableHeadersRow();
    for (size_t r = 0; r < cells.size(); ++r) {
      ImGui::TableNextRow();
      for (size_t c = 0; c < cells[r].size(); ++c) {
        ImGui::TableSetColumnIndex(int(c));
        const PeerCell& cell = cells[r][c];
        if (c > 0)  // numbers right-aligned in their column
          ImGui::SetCursorPosX(ImGui::GetCursorPosX() + std::max(0.0f, w[c] - ImGui::CalcTextSize(cell.text.c_str()).x));
        if (cell.colour) ImGui::PushStyleColor(ImGuiCol_Text, cell.colour);
        ImGui::TextUnformatted(cell.text.c_str());
        if (cell.colour) ImGui::PopStyleColor();
        if (c == 0 && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", s.rows[r].shape.c_str());
      }
    }
    ImGui::EndTable();
  }

  ParamValues params_;
  std::string view_forced_;  // ViewTabs: the `view` last applied to the tab bar
  measure::Worker worker_;
  measure::Results results_;
  bool sync_done_ = false, polling_ = false;
  std::chrono::steady_clock::time_point started_;
  double seconds_ = 0;
  char prefix_[256] = {};
  std::string control_error_, message_;
};

}  // namespace

std::unique_ptr<Panel> make_measure_panel() { return std::make_unique<MeasurePanel>(); }

}  // namespace kl::app
