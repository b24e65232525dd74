// The window as people live in it, driven for real under Xvfb (tests/app/window_driver.h): screenshots
// that are the frame shown and never overwrite an earlier one, a status bar that stays one line and
// whose message goes, a UI-scale round trip that leaves every widget where it was, typed values that
// apply however the field is left, the wheel that scrolls the page (Ctrl+wheel zooms a heatmap, a drag
// moves it), a window that sleeps when nothing changes, a first launch that fills the screen with the
// source pane shown (at 1280x720, and at 3840x2160 with --ui-scale 2), the help window, Enter on the
// sidebar, resetting and undoing parameters, a single unwritten column that shows, and the tooltips
// that say what a hovered cell or bar holds.
#include <cstring>
#include <set>

#include "window_driver.h"

namespace kl {
namespace {

using test::Driven;
using test::Rect;
using test::exists;
using test::read_file;
using test::sleep_ms;

// The first four numbers after `key` in `line` ("... 12 34 56 78").
Rect rect_after(const std::string& line, const std::string& key) {
  Rect r;
  const size_t at = line.find(key);
  if (at != std::string::npos) std::sscanf(line.c_str() + at + key.size(), "%d %d %d %d", &r.x0, &r.y0, &r.x1, &r.y1);
  return r;
}

// Pixels of `rgba` (w wide) inside `r` whose colour is within `tol` of (cr, cg, cb).
int count_colour(const std::vector<uint8_t>& rgba, int w, int h, Rect r, int cr, int cg, int cb, int tol) {
  int n = 0;
  for (int y = std::max(0, r.y0); y < std::min(h, r.y1); ++y)
    for (int x = std::max(0, r.x0); x < std::min(w, r.x1); ++x) {
      const uint8_t* p = &rgba[(size_t(y) * size_t(w) + size_t(x)) * 4];
      if (std::abs(p[0] - cr) <= tol && std::abs(p[1] - cg) <= tol && std::abs(p[2] - cb) <= tol) ++n;
    }
  return n;
}

// F12 saves the frame on screen, the first time too (it was all RGBA 0), under a name past every
// screenshot already in the folder; its message leaves the status bar, which stays one line throughout.
TEST_F(Driven, ScreenshotIsTheFrameShownNeverOverwritesAndItsMessageGoes) {
  start_x("1280x720");
  // Screenshots of an earlier run: they must survive.
  test::run_shell("cd '" + dir_ + "' && printf one > kernel-ladder-vector-add-1.png && printf three > kernel-ladder-vector-add-3.png",
                  nullptr);
  launch("--size 1280x720 --panel vector-add");
  move(640, 700);  // on the status bar: nothing there reacts to the pointer
  sleep_ms(1500);  // idle: the screen holds the last frame
  const Rect bar = place("status bar");
  std::vector<uint8_t> before;
  int w = 0, h = 0;
  ASSERT_TRUE(screen(before, w, h));

  size_t from = log().size();
  key("F12");
  const std::string line = wait_for("screenshot /", from);
  const std::string file = line.substr(std::string("screenshot ").size());
  EXPECT_EQ(file, dir_ + "/kernel-ladder-vector-add-4.png") << "numbering must continue past -3";
  EXPECT_EQ(read_file(dir_ + "/kernel-ladder-vector-add-1.png"), "one");
  EXPECT_EQ(read_file(dir_ + "/kernel-ladder-vector-add-3.png"), "three");
  std::vector<uint8_t> shot;
  int sw = 0, sh = 0;
  ASSERT_TRUE(viz::read_png(file, shot, sw, sh)) << file;
  ASSERT_EQ(sw, 1280);
  ASSERT_EQ(sh, 720);
  // Not blank, and the frame that was on screen (above the status bar, whose frame time changes).
  std::set<uint32_t> colours;
  size_t same = 0, total = 0;
  for (int y = 0; y < bar.y0; ++y)
    for (int x = 0; x < sw; ++x) {
      const size_t i = (size_t(y) * size_t(sw) + size_t(x)) * 4;
      colours.insert(uint32_t(shot[i]) | uint32_t(shot[i + 1]) << 8 | uint32_t(shot[i + 2]) << 16);
      same += std::memcmp(&shot[i], &before[i], 3) == 0;
      ++total;
    }
  EXPECT_GT(colours.size(), 50u) << "the screenshot is blank";
  EXPECT_GE(double(same), 0.999 * double(total)) << same << " of " << total << " pixels as on screen";
  EXPECT_NE(wait_for("status screenshot saved to " + file, from), "");
  step("f12-first");

  from = log().size();
  key("F12");
  EXPECT_NE(wait_for("screenshot " + dir_ + "/kernel-ladder-vector-add-5.png", from), "");
  // The status bar: one line with the message, and the message gone after a while.
  EXPECT_EQ(place("status bar").h(), bar.h());
  EXPECT_NE(wait_for("status cleared", from, 20000), "");
  EXPECT_EQ(place("status bar").h(), bar.h());
  step("message-gone");
  EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
}

// Ctrl+= twice and Ctrl+- twice from 200 %: every widget the log places is back within 1 px (the style
// was scaled again on each change, so padding grew with every step and tables broke their headers).
TEST_F(Driven, UiScaleRoundTripKeepsEveryWidgetInPlace) {
  launch("--size 1920x1080 --ui-scale 2 --panel softmax");
  move(5, 1075);
  sleep_ms(2500);
  const std::map<std::string, Rect> start = places();
  ASSERT_TRUE(start.count("header softmax row")) << "the Row sums table's headers are not placed";
  size_t from = log().size();
  key("ctrl+equal");
  wait_for("scale 2.25", from);
  key("ctrl+equal");
  wait_for("scale 2.50", from);
  sleep_ms(800);
  step("scale-2.50");
  from = log().size();
  key("ctrl+minus");
  wait_for("scale 2.25", from);
  key("ctrl+minus");
  wait_for("scale 2.00", from);
  move(6, 1075);
  sleep_ms(2500);
  step("scale-back-to-2.00");
  const std::map<std::string, Rect> end = places();
  int checked = 0;
  for (const auto& [name, r] : start) {
    if (name.rfind("status", 0) == 0) continue;
    ASSERT_TRUE(end.count(name)) << name;
    const Rect& e = end.at(name);
    EXPECT_LE(std::abs(e.x0 - r.x0), 1) << name;
    EXPECT_LE(std::abs(e.y0 - r.y0), 1) << name;
    EXPECT_LE(std::abs(e.x1 - r.x1), 1) << name;
    EXPECT_LE(std::abs(e.y1 - r.y1), 1) << name;
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

// A value typed into a field applies on Enter, on Tab and on a click elsewhere; Escape keeps the old
// one; a refusal reads in the window's words; n has +/- (a step of its decade); Reset parameters and
// Ctrl+Z (a step at a time, the reset one step) put values back.
TEST_F(Driven, TypedValuesApplyParametersResetAndUndo) {
  launch("--size 1920x1080 --panel vector-add");
  const Rect n = place("control vector-add n");
  auto type_into_n = [&](const std::string& value) {
    click(n.x0 + 30, n.cy());
    key("ctrl+a");
    x("type --delay 30 " + value);
  };
  size_t from = log().size();
  type_into_n("5000");
  key("Return");
  EXPECT_NE(wait_for("param vector-add n 1000 -> 5000", from), "");
  from = log().size();
  type_into_n("6000");
  key("Tab");
  EXPECT_NE(wait_for("param vector-add n 5000 -> 6000", from), "");
  from = log().size();
  type_into_n("7000");
  const Rect sidebar = place("sidebar vector-add");
  click(sidebar.x0 + 10, sidebar.y1 + 400);  // the sidebar's empty part: the field loses the keyboard
  EXPECT_NE(wait_for("param vector-add n 6000 -> 7000", from), "");
  from = log().size();
  type_into_n("8000");
  key("Escape");
  click(sidebar.x0 + 10, sidebar.y1 + 400);
  sleep_ms(600);
  EXPECT_EQ(log().find("param vector-add n ", from), std::string::npos) << "Escape must keep 7000: " << log().substr(from);
  step("typed-values");

  // A refused value: under the control, in the window's words.
  from = log().size();
  type_into_n("0");
  key("Return");
  const std::string shown = wait_for("place message vector-add ", from);
  EXPECT_NE(shown.find("n = 0 is not allowed: must be integers in [1, "), std::string::npos) << shown;
  EXPECT_EQ(shown.find("--set"), std::string::npos) << shown;

  // + on n: 7000 by its decade's tenth.
  from = log().size();
  click(n.x1 - 8, n.cy());
  EXPECT_NE(wait_for("param vector-add n 7000 -> 7100", from), "");

  // Reset parameters: one step back to the defaults; Ctrl+Z undoes it, then the + before it.
  from = log().size();
  const Rect reset = place("button reset-parameters");
  click(reset.cx(), reset.cy());
  EXPECT_NE(wait_for("reset vector-add: 1 value", from), "");
  key("ctrl+z");
  EXPECT_NE(wait_for("undo vector-add reset 1 value", from), "");
  key("ctrl+z");
  EXPECT_NE(wait_for("undo vector-add n 7000 -> 7100", from), "");
  // The value is 7000 again: the next + says so.
  from = log().size();
  click(n.x1 - 8, n.cy());
  EXPECT_NE(wait_for("param vector-add n 7000 -> 7100", from), "");
  step("reset-undo");
  EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
}

// The wheel over a heatmap scrolls the page; Ctrl+wheel zooms the heatmap; a left drag moves the
// zoomed view; a double click shows all of it again.
TEST_F(Driven, WheelScrollsThePageCtrlWheelZoomsDragPans) {
  start_x("1280x720");
  launch("--size 1280x720 --panel softmax");
  wait_for("place heatmap buggy ");
  sleep_ms(800);
  const Rect h0 = place("heatmap buggy");
  size_t from = log().size();
  move(h0.cx(), h0.cy());
  sleep_ms(300);
  x("click 5");  // wheel down
  sleep_ms(800);
  const Rect h1 = place("heatmap buggy");
  EXPECT_LT(h1.y0, h0.y0) << "the page did not scroll under the wheel";
  EXPECT_EQ(log().find("view heatmap buggy", from), std::string::npos) << "the wheel alone zoomed the heatmap";
  step("wheel-scrolls");

  from = log().size();
  move(h1.cx(), h1.cy());
  x("keydown ctrl");
  sleep_ms(100);
  x("click 4");
  sleep_ms(300);
  x("click 4");
  sleep_ms(300);
  x("keyup ctrl");
  wait_for("view heatmap buggy", from);
  sleep_ms(600);
  const std::string l = log();
  const std::string zoomed = l.substr(l.rfind("view heatmap buggy"), l.find('\n', l.rfind("view heatmap buggy")) - l.rfind("view heatmap buggy"));
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  ASSERT_EQ(std::sscanf(zoomed.c_str(), "view heatmap buggy %f %f %f %f", &x0, &y0, &x1, &y1), 4) << zoomed;
  EXPECT_LT(x1 - x0, 2000.0f) << "Ctrl+wheel did not zoom: " << zoomed;
  step("ctrl-wheel-zooms");

  from = log().size();
  x("mousemove --window " + wid_ + " " + std::to_string(h1.cx()) + " " + std::to_string(h1.cy()) + " mousedown 1");
  for (int dx = 20; dx <= 120; dx += 20)
    x("mousemove --window " + wid_ + " " + std::to_string(h1.cx() + dx) + " " + std::to_string(h1.cy())), sleep_ms(60);
  x("mouseup 1");
  const std::string dragged = wait_for("view heatmap buggy", from);
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  ASSERT_EQ(std::sscanf(dragged.c_str(), "view heatmap buggy %f %f %f %f", &d0, &d1, &d2, &d3), 4);
  EXPECT_LT(d0, x0) << "dragging right shows the columns to the left";
  step("drag-pans");

  from = log().size();
  x("mousemove --window " + wid_ + " " + std::to_string(h1.cx()) + " " + std::to_string(h1.cy()) + " click --repeat 2 --delay 150 1");
  EXPECT_NE(wait_for("view heatmap buggy 0.0 0.0 2000.0", from), "");
  EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
}

// Idle, the window waits for input instead of drawing 30-40 frames a second (85 % of a core): under
// 5 % of a core over five seconds, and it still answers the next key at once.
TEST_F(Driven, IdleWindowSleepsAndStillAnswers) {
  launch("--size 1280x720 --panel softmax");
  move(5, 5);
  sleep_ms(3000);  // the first frames and the views' first computation
  const long t0 = cpu_ticks();
  ASSERT_GE(t0, 0);
  sleep_ms(5000);
  const long t1 = cpu_ticks();
  const double share = double(t1 - t0) / double(sysconf(_SC_CLK_TCK)) / 5.0;
  EXPECT_LT(share, 0.05) << "idle, the window took " << share * 100 << " % of a core";
  const size_t from = log().size();
  key("F1");
  EXPECT_NE(wait_for("help open", from, 3000), "");
  EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
}

// The first launch (no --size, no settings) fills the monitor's work area, and the source pane is
// shown: at 1280x720, and at 3840x2160 with --ui-scale 2.
TEST_F(Driven, FirstLaunchFillsTheScreenWithTheSourcePane) {
  for (const char* screen : {"1280x720", "3840x2160"}) {
    SCOPED_TRACE(screen);
    int sw = 0, sh = 0;
    std::sscanf(screen, "%dx%d", &sw, &sh);
    start_x(screen);
    test::run_shell("rm -rf '" + dir_ + "/config' && mkdir -p '" + dir_ + "/config'", nullptr);
    const size_t from = log().size();
    launch(sw > 2000 ? "--ui-scale 2" : "");
    const std::string size = wait_for("\nsize ", from);
    int w = 0, h = 0;
    ASSERT_EQ(std::sscanf(size.c_str(), "size %dx%d", &w, &h), 2) << size;
    EXPECT_GE(w, sw * 9 / 10) << size;
    EXPECT_GE(h, sh * 9 / 10) << size;
    const std::string pane = wait_for("place pane source ", from);
    const Rect p = rect_after(pane, "place pane source ");
    EXPECT_GT(p.w(), w / 4) << pane;
    EXPECT_GT(p.h(), h / 6) << pane;
    step(std::string("first-launch-") + screen);
    EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
  }
}

// F1 and the sidebar's Help entry open the help: what each rung teaches (every panel of the sidebar),
// the keys, where files go (this folder), the version; Escape closes it. Enter opens the sidebar entry
// the keyboard is on.
TEST_F(Driven, HelpWindowAndEnterOnTheSidebar) {
  launch("--size 1920x1080 --panel vector-add");
  size_t from = log().size();
  key("F1");
  EXPECT_NE(wait_for("help open", from), "");
  for (const char* title : {"help 1 · Vector add: ", "help 1½ · Memory: transpose: the warp's view of memory: ",
                            "help 3 · Softmax", "help 6 · Backward: ", "help Measure: "})
    EXPECT_NE(wait_for(title, from, 2000), "") << title;
  EXPECT_NE(wait_for("help F12: ", from, 2000), "");
  EXPECT_NE(wait_for("help Screenshots (F12): " + dir_ + "/kernel-ladder-PANEL-N.png", from, 2000), "");
  EXPECT_NE(wait_for("help version kernel-ladder ", from, 2000), "");
  step("help-f1");
  key("Escape");
  EXPECT_NE(wait_for("help closed", from), "");
  from = log().size();
  const Rect help = place("sidebar help");
  click(help.cx(), help.cy());
  EXPECT_NE(wait_for("help open", from), "");
  key("F1");
  EXPECT_NE(wait_for("help closed", from), "");

  // Click the first entry, Down, Enter: the second panel (rung 1½) opens.
  from = log().size();
  const Rect first = place("sidebar vector-add");
  click(first.cx(), first.cy());
  key("Down");
  key("Return");
  EXPECT_NE(wait_for("panel transpose", from), "");
  step("enter-opens");
  EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
}

// n_cols = 1025: the one unwritten column is seen (a mark on the column axis and red pixels at it;
// none before), with the key naming it.
TEST_F(Driven, SingleUnwrittenColumnIsVisible) {
  start_x("1280x720");
  launch("--size 1280x720 --panel softmax --set n_cols=1025");
  const std::string marks = wait_for("heatmap buggy unwritten columns [", 0);
  EXPECT_EQ(marks.find("columns []"), std::string::npos) << marks;
  EXPECT_NE(marks.find("key never-written"), std::string::npos) << marks;
  EXPECT_NE(wait_for("heatmap fixed unwritten columns [] key", 0), "");
  sleep_ms(800);
  const Rect hm = place("heatmap buggy");
  std::vector<uint8_t> rgba;
  int w = 0, h = 0;
  ASSERT_TRUE(screen(rgba, w, h));
  // The mark above the image and the checker's red in it, within the last tenth of the columns.
  const Rect tail{hm.x1 - hm.w() / 10, hm.y0 - 10, hm.x1 + 1, hm.y1};
  EXPECT_GT(count_colour(rgba, w, h, Rect{tail.x0, tail.y0, tail.x1, hm.y0}, 235, 50, 50, 20), 5) << "no mark";
  EXPECT_GT(count_colour(rgba, w, h, Rect{tail.x0, hm.y0, tail.x1, hm.y1}, 219, 36, 36, 20), 5) << "no red in the image";
  step("n_cols-1025");
  EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
}

// Hovering Backward's P and dS cells (its Tiles tab) names the cell and its value, dK's names its value, and
// FlashAttention's alpha bars name their query row (they read ": 1").
TEST_F(Driven, TooltipsSayWhatIsHovered) {
  launch("--size 1920x1080 --panel backward --set view=tiles");  // P, dS and dK: the Tiles tab
  for (const char* id : {"p", "ds", "dk"}) {
    wait_for(std::string("place heatmap ") + id + " ");
    const Rect r = place(std::string("heatmap ") + id);
    const size_t from = log().size();
    move(r.x0 + 3, r.y0 + 3);
    const std::string tip = wait_for("tooltip ", from, 5000);
    const std::string want = std::string(id) == "p" ? "recomputed P[row" : std::string(id) == "ds" ? "dS[row" : "dK[key";
    EXPECT_NE(tip.find(want), std::string::npos) << tip;
    EXPECT_NE(tip.find(" = "), std::string::npos) << tip;
    move(5, 5);
    sleep_ms(300);
  }
  size_t from = log().size();
  const Rect fa = place("sidebar flash-attention");
  click(fa.cx(), fa.cy());
  wait_for("panel flash-attention", from);
  wait_for("place plot alpha-bars ", from);
  sleep_ms(500);
  const Rect bars = place("plot alpha-bars");
  from = log().size();
  move(bars.cx(), bars.cy());
  const std::string tip = wait_for("tooltip ", from, 5000);
  EXPECT_NE(tip.find("query row "), std::string::npos) << tip;
  EXPECT_NE(tip.find("alpha = "), std::string::npos) << tip;
  EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
}

// The presenter's keys at 1280x720: F2 hides the source pane (the view takes the panel's height) and shows it again,
// Ctrl+B hides the sidebar (the panel takes its width; the status bar says how to bring it back) and shows it,
// Ctrl+PageDown / Ctrl+PageUp open the next and the previous rung.
TEST_F(Driven, PresenterKeysSourceSidebarAndRungs) {
  start_x("1280x720");
  launch("--size 1280x720 --panel softmax");
  size_t from = log().size();
  key("F2");
  wait_for("source hidden", from);
  step("f2-source-hidden");
  from = log().size();
  key("F2");
  wait_for("source shown", from);
  from = log().size();
  key("ctrl+b");
  wait_for("sidebar hidden", from);
  EXPECT_NE(wait_for("status sidebar hidden: Ctrl+B brings it back", from), "");
  step("ctrl-b-sidebar-hidden");
  from = log().size();
  key("ctrl+Next");
  EXPECT_EQ(wait_for("panel ", from), "panel attention");
  from = log().size();
  key("ctrl+Prior");
  EXPECT_EQ(wait_for("panel ", from), "panel softmax");
  from = log().size();
  key("ctrl+b");
  wait_for("sidebar shown", from);
  step("ctrl-b-sidebar-shown");
  EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
}

// Rung 5's Timeline tab: the source pane shows the recorded fast kernel's source with every stamp lit; a click on
// a phase in the key lights that phase's code (the pane follows), the same click again every stamp, and a click
// on a phase in a warpgroup's lane lights that phase's.
TEST_F(Driven, TimelinePhaseClickedShowsItsCode) {
  launch("--size 1920x1080 --panel flash-attention");
  size_t from = log().size();
  wait_for("place tab flash-views inside ");
  // On a loaded machine the first frames (rung 5's study) come slowly and a click among them can be lost, so the
  // tab is pointed at, then clicked until its view opens, as the Measure test does with its tabs.
  const std::string kernel = "source flash_attention_fast_sm90.cuh";
  for (int t = 0; t < 20 && log().find(kernel, from) == std::string::npos; ++t) {
    const Rect tab = settled_place("tab flash-views inside");
    move(tab.cx(), tab.cy());
    sleep_ms(300);
    click(tab.cx(), tab.cy());
    sleep_ms(700);
  }
  EXPECT_EQ(wait_for(kernel, from), kernel) << "the tab's source pane is not the recorded kernel's, every stamp lit";
  wait_for("place phase softmax ", from);
  const Rect softmax = settled_place("phase softmax");
  from = log().size();
  move(softmax.cx(), softmax.cy());
  sleep_ms(300);
  click(softmax.cx(), softmax.cy());
  EXPECT_EQ(wait_for("timeline phase ", from), "timeline phase softmax");
  EXPECT_EQ(wait_for(kernel + "/", from), kernel + "/softmax");
  step("timeline-phase-softmax");
  from = log().size();
  click(softmax.cx(), softmax.cy());
  EXPECT_EQ(wait_for("timeline phase ", from), "timeline phase all");
  EXPECT_EQ(wait_for(kernel, from), kernel);
  wait_for("place lane timeline lanes warpgroup 0 ");
  const Rect lane = settled_place("lane timeline lanes warpgroup 0");
  from = log().size();
  move(lane.cx(), lane.cy());
  sleep_ms(300);
  click(lane.cx(), lane.cy());
  const std::string picked = wait_for("timeline phase ", from);
  ASSERT_GT(picked.size(), std::string("timeline phase ").size());
  const std::string phase = picked.substr(std::string("timeline phase ").size());
  EXPECT_NE(phase, "all");
  EXPECT_EQ(wait_for(kernel + "/", from), kernel + "/" + phase);
  step("timeline-lane-clicked");
  EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
}

// The editor after a gallery bug runs: its status line repeats the panel's red verdict (it said "ran"
// in green while the verdict, scrolled away, said no); after a compile error the views are marked
// stale; Ctrl+Z undoes a word, not a key; Reset is undone by Ctrl+Z too.
TEST_F(Driven, EditorVerdictStaleMarkWordUndoAndUndoableReset) {
  launch("--size 1920x1080 --panel softmax");
  size_t from = log().size();
  const Rect edit = place("button edit softmax");
  click(edit.cx(), edit.cy());
  wait_for("editor open softmax", from);
  sleep_ms(800);  // the shipped kernel's verdicts, seen with the editor open
  const Rect load =
      wait_for("place button load-bug softmax ", from).empty() ? Rect{} : settled_place("button load-bug softmax");
  click(load.cx(), load.cy());
  wait_for("place bug softmax hard coded block size ", from);
  const Rect bug = settled_place("bug softmax hard coded block size");  // the popup settles in its first frames
  click(bug.x0 + 20, bug.cy());
  wait_for("editor bug softmax hard coded block size", from);
  key("ctrl+Return");
  const std::string run = wait_for("editor run softmax: ", from, 180000);
  EXPECT_NE(run.find(": ran,"), std::string::npos) << run;
  const std::string verdict = wait_for("editor verdict ", from, 60000);
  EXPECT_NE(verdict.find("editor verdict fails: "), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("fixed matches reference: no"), std::string::npos) << verdict;
  step("editor-bug-verdict");

  // A typo: it does not compile, and the views say they are stale.
  from = log().size();
  const Rect ed = place("editor softmax");
  click(ed.x0 + (ed.x1 - ed.x0) / 2, ed.y0 + 40);
  wait_for("editor focus softmax", from);
  key("ctrl+Home");
  x("type --delay 30 'int typo = undefined_name;'");
  key("Return");
  key("ctrl+Return");
  const std::string failed = wait_for("editor run softmax: ", from, 180000);
  EXPECT_NE(failed.find("compile errors"), std::string::npos) << failed;
  const std::string stale = wait_for("stale softmax: ", from);
  EXPECT_NE(stale.find("the last edited kernel that ran"), std::string::npos) << stale;
  step("editor-stale");

  // Ctrl+Z: the last word and its line break, not one key.
  from = log().size();
  click(ed.x0 + (ed.x1 - ed.x0) / 2, ed.y0 + 40);
  sleep_ms(300);
  key("ctrl+z");
  const std::string undo = wait_for("editor undo softmax: ", from);
  int chars = 0;
  ASSERT_EQ(std::sscanf(undo.c_str(), "editor undo softmax: %d chars", &chars), 1) << undo;
  EXPECT_LT(chars, -1) << undo;
  EXPECT_GT(chars, -27) << "one Ctrl+Z undid the whole line: " << undo;

  // Reset, then Ctrl+Z: the edit is back.
  from = log().size();
  const Rect reset = place("button reset softmax");
  click(reset.cx(), reset.cy());
  wait_for("editor reset softmax", from);
  EXPECT_NE(wait_for("stale cleared softmax", from), "");
  sleep_ms(400);
  key("ctrl+z");
  const std::string back = wait_for("editor undo softmax: ", from);
  ASSERT_EQ(std::sscanf(back.c_str(), "editor undo softmax: %d chars", &chars), 1) << back;
  EXPECT_NE(chars, 0) << back;
  const std::string edited = wait_for("editor edited softmax ", log().find("editor undo softmax: ", from));
  EXPECT_EQ(edited.find("+0 -0"), std::string::npos) << edited;
  step("editor-reset-undone");
  EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
}

// Measure on the CPU: a warning that CPU timings are noisy, the bandwidth plot's y axis logarithmic (on a
// linear one the slow series lay on 0), the table's FlashAttention rows at the compute plot's largest
// length (it listed L = 512 while the plot reached 1024), and "wrote" naming the folder.
TEST_F(Driven, MeasureOnTheCpuWarnsOfNoiseAndNamesTheFolder) {
  // The CPU backend on every machine (KL_TEST_BACKEND=cuda too): the warning is the CPU's; on a GPU the
  // panel's numbers are MeasureCommand's and MeasurePanel's tests.
  launch("--size 1920x1080 --panel measure --set quick=1", KL_BINARY, "app.out", "cpu");
  size_t from = log().size();
  const Rect run = place("button measure run");
  click(run.cx(), run.cy());
  const std::string bw = wait_for("plot bandwidth x ", from, 120000);
  EXPECT_NE(bw.find("y axis log"), std::string::npos) << bw;
  EXPECT_NE(wait_for("note measure Timings on a shared CPU are noisy", from, 120000), "");
  // The ratio table is the Ceiling tab's.
  const Rect ceiling = place("tab measure-views ceiling");
  click(ceiling.cx(), ceiling.cy());
  wait_for("row measure flash", from, 120000);
  // Export JSON is enabled once the run is done: clicked until it writes.
  const Rect exp = place("button measure export-json");
  const std::string wrote = "note measure wrote " + dir_ + "/kernel-ladder-measure.json";
  for (int t = 0; t < 60 && log().find(wrote, from) == std::string::npos; ++t) click(exp.cx(), exp.cy()), sleep_ms(1000);
  EXPECT_NE(wait_for(wrote, from), "");
  EXPECT_TRUE(exists(dir_ + "/kernel-ladder-measure.json"));

  // FlashAttention's tab: its plot against the GEMM. The "wrote" line moves the tabs down; on a loaded machine
  // the frame that places them there can come late, so the tab is read where it is and clicked until it opens.
  for (int t = 0; t < 60 && log().find("plot compute x ", from) == std::string::npos; ++t) {
    sleep_ms(400);
    const Rect tab = place("tab measure-views flash");
    click(tab.cx(), tab.cy());
    sleep_ms(600);
  }
  EXPECT_NE(wait_for("plot compute x ", from, 20000), "");
  const std::string l = log();
  const size_t plot = l.rfind("plot compute x ");
  ASSERT_NE(plot, std::string::npos) << l.substr(from);
  double lo = 0, hi = 0;
  ASSERT_EQ(std::sscanf(l.c_str() + plot, "plot compute x %lf to %lf", &lo, &hi), 2) << l.substr(plot, 80);
  // The table as last logged: a block of consecutive "row measure" lines.
  std::vector<std::string> table, block;
  std::istringstream in(l.substr(from));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("row measure ", 0) == 0) block.push_back(line);
    else if (!block.empty()) table = block, block.clear();
  }
  if (!block.empty()) table = block;
  int rows = 0;
  for (const std::string& row : table) {
    if (row.rfind("row measure flash", 0) != 0) continue;
    const size_t size = row.find("| L=");
    ASSERT_NE(size, std::string::npos) << row;
    EXPECT_EQ(std::atof(row.c_str() + size + 4), hi) << row << " (the compute plot reaches " << hi << ")";
    ++rows;
  }
  EXPECT_GT(rows, 0);
  step("measured-and-exported");
  EXPECT_EQ(quit(), 0) << read_file(dir_ + "/app.out");
}

}  // namespace
}  // namespace kl
