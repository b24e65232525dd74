#include "app/cli/timeline.h"

#include <imgui.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "app/layout_report.h"
#include "app/panels/timeline_view.h"
#include "app/ui.h"
#include "kernels/measure/timeline.h"
#include "kernels/runtime/errors.h"
#include "kernels/runtime/params.h"
#include "viz/gl_check.h"
#include "viz/layout_audit.h"
#include "viz/png.h"
#include "viz/render_host.h"

namespace kl::app::cli {
namespace {

timeline::RecordRequest request_of(const TimelineOptions& o, const Common& c) {
  ParamValues v(timeline::record_params());
  for (const std::string& kv : c.sets) v.set(kv);
  timeline::RecordRequest r = timeline::request_of(o.kernel, v, o.path, o.iterations);
  if (!o.ctas.empty()) timeline::parse_ctas(o.ctas, &r);
  timeline::validate(r);
  return r;
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

// The options that only recording takes, refused with --from.
void refuse_with_from(const TimelineOptions& o, const Common& c) {
  auto refuse = [&](const std::string& what) {
    throw InputError("timeline --from " + o.from + ": " + what + " is for recording; --from draws a recorded file");
  };
  if (!o.kernel.empty()) refuse("the kernel (" + o.kernel + ")");
  if (!o.json.empty()) refuse("--json");
  if (o.append) refuse("--append");
  if (!c.sets.empty()) refuse("--set");
  if (o.path != "auto") refuse("--path");
  if (o.ctas == "all") refuse("--ctas all");
  if (o.out.empty() && !o.layout_report) throw InputError("timeline --from " + o.from + ": --out FILE.png is required");
}

std::vector<int> drawn_ctas(const std::string& text) {
  if (text.empty()) return {};
  timeline::RecordRequest r;
  timeline::parse_ctas(text, &r);
  return r.all_ctas ? std::vector<int>{} : r.ctas;  // recording every CTA: the first is drawn
}

// Renders the view of `view` headlessly (--out, --layout-report); returns the exit code.
int draw(TimelineView& view, const TimelineOptions& o, const Common& c) {
  if (!o.window.empty()) {
    double t0 = 0, t1 = 0;
    parse_window(o.window, &t0, &t1);
    view.set_window(t0, t1);
  }
  const Size size = parse_size(c.size, {1600, 900});
  const float scale = o.ui_scale.empty() ? 1.0f : parse_ui_scale(o.ui_scale);
  viz::set_ui_scale(scale);
  viz::audit::set_enabled(o.layout_report);
  AppContext ctx;
  ctx.backend = choose_backend(c.backend);
  ctx.device = device_info(ctx.backend.backend);
  ctx.headless = true;
  auto host = headless(size);
  char look[64];
  std::snprintf(look, sizeof look, "%dx%d scale %g", size.w, size.h, double(scale));
  const std::vector<std::string> findings = draw_timeline_frames(view, *host, ctx, 3, std::string("timeline ") + look);
  for (const std::string& f : findings) std::printf("%s\n", f.c_str());
  if (!o.out.empty()) {
    std::vector<uint8_t> rgba;
    int w = 0, h = 0;
    if (!host->read_pixels(rgba, w, h)) throw RuntimeError("could not read the rendered frame back");
    viz::write_png(o.out, rgba, w, h);
    std::printf("wrote %s (%dx%d; Notice: %s)\n", o.out.c_str(), w, h, view.notice().c_str());
  }
  if (o.layout_report)
    std::printf("layout report: %zu finding%s over 1 view at %s\n", findings.size(), findings.size() == 1 ? "" : "s", look);
  if (viz::gl_error_count()) return 1;
  return findings.empty() ? 0 : 1;
}

int draw_from_file(const TimelineOptions& o, const Common& c) {
  refuse_with_from(o, c);
  const timeline::File f = timeline::load(o.from);
  TimelineView view("");
  view.use_file(f, o.from);
  view.select(o.recording < 0 ? 0 : o.recording);
  view.show_ctas(drawn_ctas(o.ctas));
  return draw(view, o, c);
}

}  // namespace

void parse_window(const std::string& text, double* t0, double* t1) {
  const size_t dots = text.find("..");
  char* end = nullptr;
  const std::string a = dots == std::string::npos ? "" : text.substr(0, dots), b = dots == std::string::npos ? "" : text.substr(dots + 2);
  const double x = std::strtod(a.c_str(), &end);
  const bool ok_a = !a.empty() && end && *end == '\0';
  const double y = std::strtod(b.c_str(), &end);
  const bool ok_b = !b.empty() && end && *end == '\0';
  if (!ok_a || !ok_b || !(y > x) || x < 0)
    throw InputError(out_of_range_message("--window", text, "START..END in µs, 0 <= START < END (12.5..20)"));
  *t0 = x * 1e3, *t1 = y * 1e3;
}

std::vector<std::string> draw_timeline_frames(TimelineView& view, viz::RenderHost& host, AppContext& ctx, int frames,
                                              const std::string& context) {
  const ImGuiWindowFlags fixed = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                 ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoTitleBar;
  for (int i = 0; i < frames; ++i) {
    if (!host.begin_frame()) throw RuntimeError("headless host stopped");
    viz::audit::clear();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(float(host.width()), float(host.height())));
    ImGui::Begin("Inside the fast kernel", nullptr, fixed);
    ui::section("Inside the fast kernel: a timeline recorded by the Hopper kernel");
    view.draw(ctx, nullptr);
    ImGui::End();
    host.end_frame();
    ctx.frame++;
  }
  return viz::audit::collect(context);
}

CLI::App* add_timeline(CLI::App& app, TimelineOptions& o, Common& c) {
  CLI::App* cmd = app.add_subcommand(
      "timeline", "record the fast Hopper kernels' timeline (per warp role: loads, tensor-core products, softmax) as "
                  "JSON and draw it, or draw a recorded file (--from)");
  cmd->add_option("kernel", o.kernel, std::string(timeline::kForward) + " or " + timeline::kBackward + " (not with --from)");
  add_set_option(*cmd, c.sets, "L=, d=, causal=, B=, H=, Hkv= (forward), deterministic= (backward) (repeatable)");
  add_backend_option(*cmd, c.backend);
  cmd->add_option("--path", o.path, "the kernel: auto (the by-shape default), or one of the bulk-copy paths");
  cmd->add_option("--ctas", o.ctas,
                  "CTAs to record: indices separated by commas, or all (default: first, middle, last); drawn: these "
                  "(default: the first recorded)");
  cmd->add_option("--iterations", o.iterations, "timed launches of each kernel, plain and instrumented (default 20)");
  cmd->add_option("--json", o.json, "write the recording to this file");
  cmd->add_flag("--append", o.append, "add the recording to FILE's recordings (FILE is created if missing)");
  cmd->add_option("--out", o.out, "draw the view into this PNG file");
  cmd->add_option("--from", o.from, "draw a recorded JSON file (no GPU needed) instead of recording");
  cmd->add_option("--recording", o.recording, "with --from: the recording drawn, from 0 (default 0)");
  cmd->add_option("--window", o.window, "the time window drawn, START..END in µs (default: the steady state)");
  add_size_option(*cmd, c.size, "WIDTHxHEIGHT of the PNG (default 1600x900)");
  cmd->add_option("--ui-scale", o.ui_scale, "UI scale in [0.5, 4] (default 1)");
  cmd->add_flag("--layout-report", o.layout_report, "list what is cut, outside its region or overlapping; exit 1 if any");
  return cmd;
}

int run_timeline(const TimelineOptions& o, const Common& c) {
  if (!o.from.empty()) return draw_from_file(o, c);
  if (o.kernel.empty()) throw InputError("timeline: the kernel to record (" + std::string(timeline::kForward) + " or " +
                                         timeline::kBackward + "), or --from FILE.json to draw a recorded file");
  if (o.kernel != timeline::kForward && o.kernel != timeline::kBackward)
    throw InputError("timeline " + o.kernel + ": unknown kernel; allowed: " + timeline::kForward + ", " +
                     timeline::kBackward);
  if (o.recording >= 0) throw InputError("--recording " + std::to_string(o.recording) + ": only with --from");
  if (o.json.empty() && o.out.empty()) throw InputError("timeline " + o.kernel + ": --json FILE or --out FILE.png is required");
  if (o.append && o.json.empty()) throw InputError("--append: only with --json FILE");
  if (!o.window.empty()) {
    double t0 = 0, t1 = 0;
    parse_window(o.window, &t0, &t1);  // refused before the GPU runs
  }
  if (!o.ui_scale.empty()) parse_ui_scale(o.ui_scale);
  if (c.backend == "cpu")
    throw InputError("timeline: --backend cpu cannot run the Hopper kernels it records; use --backend cuda or auto "
                     "(or --from FILE.json to draw a recorded file)");
  const timeline::RecordRequest r = request_of(o, c);
  timeline::File file;
  if (o.append && exists(o.json)) file = timeline::load(o.json);  // a bad file is refused before the GPU runs
  file.recordings.push_back(timeline::record(r));
  for (const std::string& line : timeline::summary_lines(file.recordings.back())) std::printf("%s\n", line.c_str());
  if (!o.json.empty()) {
    timeline::save(file, o.json);
    std::printf("wrote %s (%zu recording%s)\n", o.json.c_str(), file.recordings.size(),
                file.recordings.size() == 1 ? "" : "s");
  }
  if (o.out.empty()) return 0;
  TimelineView view("");
  view.use_file(file, o.json.empty() ? "this run" : o.json, int(file.recordings.size()) - 1);
  view.select(int(file.recordings.size()) - 1);
  view.show_ctas(drawn_ctas(o.ctas));
  return draw(view, o, c);
}

}  // namespace kl::app::cli
