// The real window under Xvfb, driven by X input events (xdotool, through XTEST) as a user would drive
// it: every sidebar entry clicked, a slider dragged, a value typed into an input and Enter pressed, an
// out-of-range value typed and its refusal seen under the control, a heatmap cell hovered, F12 pressed
// (the status bar says where the PNG went), the window resized to 1280x720 and back, and closed with
// Ctrl+Q. The app's state is read from the line log the window writes (--ui-log), which also carries
// the window's own layout audit; after each step the screen is read from Xvfb's framebuffer file
// (-fbdir, XWD format) and kept as a PNG under the test's scratch directory (window-driven-TEST/NN-STEP.png).
// Skips only where Xvfb or xdotool is not installed (./ladder.sh installs both).
#include "window_driver.h"

namespace kl {
namespace {

using test::Driven;
using test::Rect;
using test::exists;
using test::read_file;
using test::sleep_ms;

TEST_F(Driven, EveryInputAUserGivesTheWindow) {
  launch("--size 1920x1080");
  wait_for("panel vector-add");
  step("start");

  // Collapse the source pane (its box in the sidebar): the view gets the panel's whole width.
  {
    const size_t from = log().size();
    const Rect r = place("checkbox source");
    click(r.x0 + 10, r.cy());
    wait_for("source hidden", from);
    step("source-hidden");
  }

  // Every sidebar entry, then back to the first.
  for (const char* id : {"relu-dropout", "softmax", "attention", "flash-attention", "measure", "vector-add"}) {
    const size_t from = log().size();
    const Rect r = place(std::string("sidebar ") + id);
    click(r.cx(), r.cy());
    wait_for(std::string("panel ") + id, from);
    step(std::string("panel-") + id);
  }

  // Drag the block_size slider to the right: the value changes, old and new logged.
  {
    const size_t from = log().size();
    const Rect r = place("control vector-add block_size");
    x("mousemove --window " + wid_ + " " + std::to_string(r.x0 + 20) + " " + std::to_string(r.cy()) + " mousedown 1");
    for (int dx = 40; dx <= 200; dx += 40)
      x("mousemove --window " + wid_ + " " + std::to_string(r.x0 + 20 + dx) + " " + std::to_string(r.cy())), sleep_ms(50);
    x("mouseup 1");
    const std::string line = wait_for("param vector-add block_size ", from);
    EXPECT_NE(line.find(" -> "), std::string::npos) << line;
    step("drag-block_size");
  }

  // Type a value into n and press Enter.
  {
    const size_t from = log().size();
    const Rect r = place("control vector-add n");
    click(r.x0 + 30, r.cy());
    key("ctrl+a");
    x("type --delay 30 5000");
    key("Return");
    const std::string line = wait_for("param vector-add n ", from);
    EXPECT_NE(line.find("-> 5000"), std::string::npos) << line;
    step("type-n-5000");
  }

  // An out-of-range value: refused, and the refusal is shown under the control.
  {
    const size_t from = log().size();
    const Rect r = place("control vector-add n");
    click(r.x0 + 30, r.cy());
    key("ctrl+a");
    x("type --delay 30 0");
    key("Return");
    const std::string line = wait_for("refused vector-add n: ", from);
    EXPECT_NE(line.find("n=0"), std::string::npos) << line;  // the value and the allowed range, one line
    EXPECT_NE(line.find("[1, "), std::string::npos) << line;
    const std::string shown = wait_for("place message vector-add ", from);
    int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    const size_t nums = shown.find_last_of("abcdefghijklmnopqrstuvwxyz)]");
    ASSERT_EQ(std::sscanf(shown.c_str() + nums + 1, "%d %d %d %d", &x0, &y0, &x1, &y1), 4) << shown;
    EXPECT_GE(y0, r.y1) << "the refusal is not under the control: " << shown;
    EXPECT_EQ(log().find("param vector-add n ", from), std::string::npos) << "a refused value was applied";
    step("refused-n-0");
  }

  // Hover a heatmap cell.
  {
    const size_t from = log().size();
    const Rect r = place("heatmap programs");
    x("mousemove --window " + wid_ + " " + std::to_string(r.cx()) + " " + std::to_string(r.cy()));
    const std::string line = wait_for("hover heatmap programs col ", from);
    EXPECT_NE(line.find(" row "), std::string::npos) << line;
    step("hover-heatmap");
  }

  // F12: a PNG, and the status bar says where it went.
  {
    const size_t from = log().size();
    x("mousemove --window " + wid_ + " 5 5");
    key("F12");
    const std::string line = wait_for("screenshot /", from);
    const std::string file = line.substr(std::string("screenshot ").size());
    EXPECT_TRUE(exists(file)) << file;
    EXPECT_NE(wait_for("status screenshot saved to " + file, from), "");
    step("f12");
  }

  // Ctrl+= scales the UI up live (the fonts are rasterised again between frames), Ctrl+0 goes back.
  {
    size_t from = log().size();
    key("ctrl+equal");
    wait_for("scale 1.25", from);
    step("ctrl-equal-scale-1.25");
    from = log().size();
    key("ctrl+0");
    wait_for("scale 1.00", from);
    step("ctrl-0-scale-1");
  }

  // Resize to 1280x720 and back.
  {
    size_t from = log().size();
    x("windowsize " + wid_ + " 1280 720");
    wait_for("size 1280x720", from);
    step("size-1280x720");
    from = log().size();
    x("windowsize " + wid_ + " 1920 1080");
    wait_for("size 1920x1080", from);
    step("size-1920x1080");
  }

  // Ctrl+Q closes the window; the app exits 0 with no GL error.
  key("ctrl+q");
  int status = -1;
  for (int t = 0; t < 200 && waitpid(app_, &status, WNOHANG) == 0; ++t) sleep_ms(50);
  app_ = -1;
  ASSERT_TRUE(WIFEXITED(status)) << read_file(dir_ + "/app.out");
  EXPECT_EQ(WEXITSTATUS(status), 0) << read_file(dir_ + "/app.out");
  EXPECT_NE(read_file(dir_ + "/app.out").find(", 0 GL errors"), std::string::npos) << read_file(dir_ + "/app.out");
}

// The source pane as an editor, in the product binary (the edited kernel compiled for real, in the worker:
// the host compiler on the CPU backend, NVRTC on CUDA): Edit clicked, a line typed at the top of the
// source, Ctrl+Enter pressed once, the compiler's error shown on line 1; Ctrl+Enter in a panel's input
// compiles nothing; the edit is in the settings file after Ctrl+Q and is back on the next start.
TEST_F(Driven, EditorTypedIntoAndCtrlEnterOnce) {
  const std::string start = "cd '" + dir_ + "' && DISPLAY=" + display_ + " XDG_CONFIG_HOME='" + dir_ + "/config' exec " +
                            std::string(KL_BINARY) + " --backend " + test::window_backend() +
                            " --size 1920x1080 --panel vector-add --ui-log '" + dir_ + "/ui.log'";
  app_ = spawn(start + " > '" + dir_ + "/app.out' 2>&1");
  wait_for("panel vector-add");
  wait_for("size ");
  wid_ = x("search --sync --name 'Kernel Ladder'");
  while (!wid_.empty() && (wid_.back() == '\n' || wid_.back() == ' ')) wid_.pop_back();
  ASSERT_FALSE(wid_.empty()) << "no X window named Kernel Ladder";
  if (wid_.find('\n') != std::string::npos) wid_ = wid_.substr(wid_.rfind('\n') + 1);
  x("windowfocus --sync " + wid_);
  step("editor-start");

  {
    const size_t from = log().size();
    const Rect r = place("button edit vector-add");
    click(r.cx(), r.cy());
    wait_for("editor open vector-add", from);
    step("editor-open");
  }
  {
    const size_t from = log().size();
    wait_for("place editor vector-add ");
    const Rect r = place("editor vector-add");
    click(r.x0 + (r.x1 - r.x0) / 2, r.y0 + 40);
    key("ctrl+Home");
    x("type --delay 30 'int typo = undefined_name;'");
    key("Return");
    const std::string line = wait_for("editor edited vector-add +1 -0", from);
    EXPECT_NE(line, "");
    key("Escape");  // not a revert of everything typed (Dear ImGui's text field alone would)
    sleep_ms(300);
    EXPECT_EQ(log().find("editor edited vector-add +0 -0", from), std::string::npos) << log().substr(from);
    step("editor-typed");
  }
  {
    const size_t from = log().size();
    key("ctrl+Return");
    const std::string run = wait_for("editor run vector-add: ", from);
    EXPECT_NE(run.find("compile errors, "), std::string::npos) << run;
    const std::string diag = wait_for("editor diagnostic vector-add ", from);
    EXPECT_NE(diag.find("vector-add 1:"), std::string::npos) << diag;  // the typed line, named by the compiler
    EXPECT_NE(diag.find("undefined_name"), std::string::npos) << diag;
    EXPECT_NE(wait_for("editor status vector-add ", from).find("compile error"), std::string::npos);
    step("editor-ctrl-enter");
  }
  {
    // Ctrl+F, a word, Enter: the next match, scrolled into view.
    const size_t from = log().size();
    key("ctrl+f");
    x("type --delay 30 'pid'");
    key("Return");
    const std::string line = wait_for("editor find 'pid' 2 of ", from);
    EXPECT_NE(line, "");
    step("editor-find");
    key("Escape");
  }
  {
    // Ctrl+Enter while typing into a panel's input: no compile.
    const size_t from = log().size();
    const Rect r = place("control vector-add n");
    click(r.x0 + 30, r.cy());
    key("ctrl+Return");
    sleep_ms(600);
    EXPECT_EQ(log().find("editor run ", from), std::string::npos) << log().substr(from);
    step("editor-ctrl-enter-elsewhere");
  }
  // What the edit ended as (on a loaded machine the X server can repeat a key, so the count of lines is
  // read from the log rather than assumed): the next start must bring back exactly that.
  const std::string so_far = log();
  const size_t cut = so_far.rfind("editor edited vector-add ");
  ASSERT_NE(cut, std::string::npos) << so_far;
  const std::string last_edit = so_far.substr(cut, so_far.find('\n', cut) - cut);
  key("ctrl+q");
  int status = -1;
  for (int t = 0; t < 200 && waitpid(app_, &status, WNOHANG) == 0; ++t) sleep_ms(50);
  app_ = -1;
  ASSERT_TRUE(WIFEXITED(status)) << read_file(dir_ + "/app.out");
  EXPECT_EQ(WEXITSTATUS(status), 0) << read_file(dir_ + "/app.out");
  const std::string ini = read_file(dir_ + "/config/kernel-ladder/imgui.ini");
  EXPECT_NE(ini.find("\neditor=1\n"), std::string::npos) << ini;
  EXPECT_NE(ini.find("\nedit.vector-add=int typo = undefined_name;\\n"), std::string::npos) << ini;

  // The next start: the edit is back, in the editor.
  const size_t from = log().size();
  app_ = spawn(start + " --frames 20 > '" + dir_ + "/app2.out' 2>&1");
  for (int t = 0; t < 400 && waitpid(app_, &status, WNOHANG) == 0; ++t) sleep_ms(50);
  app_ = -1;
  EXPECT_NE(wait_for(last_edit, from), "") << "expected the edit as it was saved: " << last_edit;
}

}  // namespace
}  // namespace kl
