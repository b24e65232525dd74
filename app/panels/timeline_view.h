// "Inside the fast kernel" (issue 30): the timeline recorded by the instrumented Hopper kernels, drawn on rung 5
// (the forward) and rung 6 (the backward). One lane per warp role of the chosen CTAs (the producer warp, then
// each consumer warpgroup), time left to right, each phase in its colour with a key, the work tiles labelled
// where they fit, a thin bar under a warpgroup's lane while its tensor-core product is in flight; hover gives
// the phase, tile, step and duration; Ctrl + wheel zooms, a drag pans, a double click returns to the steady-
// state window; a strip above shows the whole span with the window. Beside it the summary (kernels/studies/
// timeline_study.h): the share of time each warpgroup had a product in flight, the overlap, what the
// warpgroups did with none, the measured TFLOP/s and the cost of recording. A "Notice: ..." line above.
//
// The recordings: those embedded at build time (docs/perf/timeline-h200.json), each labelled with the device
// and date it was recorded on; on an H100/H200 "Record now" records the chosen shape and path through the code
// `kernel-ladder timeline` uses and adds it to the picker. The CPU backend cannot run the Hopper kernels: the
// view says so and draws the recorded file.
//
// A panel shows it as one of its tabs (rungs 5 and 6: `--set view=inside` opens it, `--set recording=NAME` picks
// one of the embedded recordings, `--set phase=softmax` highlights that phase's code) with draw(), after adding
// params() to its own, and gives source_focus() as its own while the tab is open. Standalone (`timeline --from FILE
// --out PNG`, the tour): use_file(), select(), show_ctas(), set_window(), draw().
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "app/panel.h"
#include "kernels/measure/timeline.h"

namespace kl::app {

class TimelineView {
 public:
  // kernel: timeline::kForward or kBackward (the embedded recordings of that kernel); empty: none (standalone).
  explicit TimelineView(const std::string& kernel);
  ~TimelineView();
  TimelineView(const TimelineView&) = delete;
  TimelineView& operator=(const TimelineView&) = delete;

  // The parameters the view adds to its panel's: "recording" (an embedded recording of `kernel` by name:
  // timeline_study::named()) and "phase" (the phase whose code the source pane highlights; "all": every stamp).
  static std::vector<ParamSpec> params(const std::string& kernel);
  static std::vector<ParamSpec> with_params(std::vector<ParamSpec> panel, const std::string& kernel);
  static bool owns(const std::string& param);  // "recording", "phase": not the panel's computation

  // The view, as wide as the content region. p: the panel's parameters (the recording picked by name), or
  // nullptr (standalone).
  void draw(AppContext& ctx, ParamValues* p);

  // Standalone: the recordings of `f` (every kernel) from `origin` ("docs/perf/timeline-h200.json"), replacing
  // the embedded ones; the first is selected. Recordings from `live_from` on were made by this run (labelled so,
  // not as recorded). InputError where f has none.
  void use_file(const timeline::File& f, const std::string& origin, int live_from = -1);
  // The recording shown (an index into the file's recordings); InputError naming `what` outside the range.
  void select(int index, const std::string& what = "--recording");
  // The CTAs drawn (their indices in the launch, each recorded); empty: the first recorded. InputError naming
  // `what` for a CTA not recorded.
  void show_ctas(const std::vector<int>& ctas, const std::string& what = "--ctas");
  // The time window in ns (from the recording's start, or from each CTA's start where aligned); InputError
  // naming `what` where it is empty or outside the CTAs' span.
  void set_window(double t0_ns, double t1_ns, const std::string& what = "--window");
  // The source pane beside the view: the recorded kernel's source, read-only, with the code of the phase the
  // panel's `phase` parameter names highlighted (set by a click on a phase in the lanes or the key), or for
  // "all" every line that stamps a phase. Empty while no recording is loaded.
  Panel::SourceFocus source_focus(const ParamValues& p) const;
  // The selected recording (nullptr while there is none) and the notice drawn for it.
  const timeline::Recording* selected() const;
  std::string notice() const;
  // In a panel: the notice for the recording its parameters pick, which the panel's own notice line shows
  // while this view's tab is open (the view then draws none of its own, standalone it does).
  std::string notice(const ParamValues& p) const;
  // The hover of a panel's controls, greyed out on this view's tab: they set nothing it draws.
  static constexpr const char* kPanelControlsNote =
      "These set the teaching kernel of the other tabs; the Timeline tab draws a recording of the\n"
      "fast kernel made on the GPU machine (pick it with Recording).";

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kl::app
