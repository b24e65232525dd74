// `kernel-ladder timeline` (issue 30, "Inside the fast kernel"):
//   timeline flash-attention|flash-attention-backward [--set L=.. d=.. causal=.. B=.. H=.. deterministic=..]
//     [--path P] [--ctas LIST|all] [--iterations N] [--json FILE [--append]] [--out FILE.png]
//   records the instrumented Hopper kernels' timeline (kernels/measure/timeline.h) headlessly on the GPU, writes
//   it as JSON with a summary on stdout, and draws it as the view does (app/panels/timeline_view.h) into a PNG;
//   timeline --from FILE.json [--recording N] [--ctas LIST] [--window A..B] --out FILE.png
//   draws a recorded file, with no GPU (docs/perf/timeline-h200.json: the docs are made on the CPU).
// Both drawings take --size, --ui-scale, --window (µs) and --layout-report (the layout audit's findings, exit 1
// where there is any). Bad input exits 2 with one line; so does a machine that cannot record (no CUDA, no
// H100/H200).
#pragma once
#include "app/cli/common.h"

namespace kl::viz {
class RenderHost;
}

namespace kl::app {
class TimelineView;
}

namespace kl::app::cli {

struct TimelineOptions {
  std::string kernel, path = "auto", ctas, json;
  int iterations = 20;
  bool append = false;
  std::string out, from, window, ui_scale;
  int recording = -1;  // -1: not given
  bool layout_report = false;
};

CLI::App* add_timeline(CLI::App& app, TimelineOptions& o, Common& c);
int run_timeline(const TimelineOptions& o, const Common& c);

// Draws the view alone, filling the host's frame (a heading, then the view), for `frames` frames; returns the
// layout audit's findings of the last frame (none unless the audit is enabled), each prefixed with `context`.
std::vector<std::string> draw_timeline_frames(TimelineView& view, viz::RenderHost& host, AppContext& ctx, int frames,
                                              const std::string& context);
// "--window 12.5..20": the window in ns; InputError naming --window otherwise.
void parse_window(const std::string& text, double* t0_ns, double* t1_ns);

}  // namespace kl::app::cli
