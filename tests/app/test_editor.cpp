// app/editor: the line diff (against a plain LCS on random texts), compile diagnostics laid on lines and
// carried through later edits, the settings' escaping and the editor's part of the settings round trip
// (also through SettingsPersistence and an ini file), and the editor's actions with the canned hooks of
// editor_test_hooks.h (which compile nothing: what is tested is the editor's side).
#include <gtest/gtest.h>
#include <imgui.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "app/editor/diagnostics.h"
#include "app/editor/editor.h"
#include "app/editor/hooks.h"
#include "app/editor/line_diff.h"
#include "app/editor/persist.h"
#include "app/panels/panels.h"
#include "app/settings.h"
#include "app/shell.h"
#include "app/ui.h"
#include "editor_test_hooks.h"
#include "test_util.h"

namespace kl {
namespace {

using namespace app::editor;

std::string join(const std::vector<DiffLine>& d, bool old_side) {
  std::string s;
  for (const DiffLine& l : d)
    if (l.kind == DiffLine::Same || (l.kind == DiffLine::Removed) == old_side)
      s += std::string(l.text) + "\n";
  return s;
}

TEST(EditorLineDiff, SmallEditsAreWhatChanged) {
  const std::string a = "a\nb\nc\nd\n", b = "a\nB\nc\nx\nd\n";
  const std::vector<DiffLine> d = line_diff(a, b);
  const DiffSummary s = summarize(d);
  EXPECT_EQ(s.added, 2);
  EXPECT_EQ(s.removed, 1);
  ASSERT_EQ(d.size(), 6u);
  EXPECT_EQ(d[1].kind, DiffLine::Removed);  // the removal before the line that replaces it
  EXPECT_EQ(d[1].text, "b");
  EXPECT_EQ(d[1].old_line, 2);
  EXPECT_EQ(d[2].kind, DiffLine::Added);
  EXPECT_EQ(d[2].text, "B");
  EXPECT_EQ(d[2].new_line, 2);
  EXPECT_EQ(d[4].kind, DiffLine::Added);
  EXPECT_EQ(d[4].new_line, 4);
  EXPECT_EQ(d[5].old_line, 4);
  EXPECT_EQ(d[5].new_line, 5);
  EXPECT_EQ(summarize(line_diff(a, a)).added + summarize(line_diff(a, a)).removed, 0);
  EXPECT_EQ(summarize(line_diff("", "x\ny")).added, 2);
  EXPECT_EQ(summarize(line_diff("x\ny", "")).removed, 2);
  EXPECT_EQ(split_lines("a\n\nb\n").size(), 3u);  // the empty middle line counts, the final '\n' starts none
  EXPECT_EQ(split_lines("a\r\nb").front(), "a\r");
}

// Against a plain LCS over the whole texts (no common head and tail first): the script rebuilds both
// texts, and keeps as many lines as the longest common subsequence has.
TEST(EditorLineDiff, RandomTextsRebuildAndKeepTheLongestCommonSubsequence) {
  std::mt19937 rng(unsigned(test::next_seed()));
  for (int round = 0; round < 300; ++round) {
    auto text = [&](int n) {
      std::vector<std::string> v;
      for (int i = 0; i < n; ++i) v.push_back(std::string(1, char('a' + rng() % 4)));
      return v;
    };
    const std::vector<std::string> a = text(int(rng() % 12)), b = text(int(rng() % 12));
    std::string ta, tb;
    for (auto& l : a) ta += l + "\n";
    for (auto& l : b) tb += l + "\n";
    std::vector<std::vector<int>> L(a.size() + 1, std::vector<int>(b.size() + 1, 0));
    for (size_t i = a.size(); i-- > 0;)
      for (size_t j = b.size(); j-- > 0;) L[i][j] = a[i] == b[j] ? L[i + 1][j + 1] + 1 : std::max(L[i + 1][j], L[i][j + 1]);
    const std::vector<DiffLine> d = line_diff(ta, tb);
    EXPECT_EQ(join(d, true), ta) << ta << "|" << tb;
    EXPECT_EQ(join(d, false), tb) << ta << "|" << tb;
    int same = 0;
    for (const DiffLine& l : d) same += l.kind == DiffLine::Same;
    EXPECT_EQ(same, L[0][0]) << ta << "|" << tb;
    EXPECT_EQ(int(d.size()), int(a.size() + b.size()) - same);
  }
}

TEST(EditorLineDiff, MapLineFollowsAnEdit) {
  const std::vector<DiffLine> d = line_diff("a\nb\nc\n", "new\na\nc\n");
  EXPECT_EQ(map_line(d, 1), 2);  // pushed down by the new first line
  EXPECT_EQ(map_line(d, 2), 3);  // removed: the line that took its place
  EXPECT_EQ(map_line(d, 3), 3);
  EXPECT_EQ(map_line(d, 9), 3);  // past the end: the last line
  EXPECT_EQ(map_line(line_diff("a\n", ""), 1), 0);
}

TEST(EditorDiagnostics, EachOnItsLineTheRestListedApart) {
  const std::string file = edited_file_name("softmax");
  EXPECT_EQ(file, "softmax.cu (edited)");
  const std::vector<Diagnostic> v = {{file, 3, 5, "expected ';'", false},
                                     {"", 3, 1, "unused variable", true},
                                     {"kl.cuh", 10, 1, "in the header", false},
                                     {file, 0, 0, "no line", false},
                                     {file, 99, 1, "past the end", false},
                                     {file, 7, 2, "second", false}};
  const LineMarks m = map_diagnostics(v, file, 20);
  ASSERT_EQ(m.on_line.size(), 2u);
  EXPECT_EQ(m.on_line.at(3), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(m.on_line.at(7), (std::vector<size_t>{5}));
  EXPECT_EQ(m.elsewhere, (std::vector<size_t>{2, 3, 4}));
  EXPECT_EQ(m.errors, 5);
  EXPECT_EQ(m.warnings, 1);
  EXPECT_EQ(v[0].text(), "3:5: error: expected ';'");
  EXPECT_EQ(v[1].text(), "3:1: warning: unused variable");
  EXPECT_EQ(v[3].text(), "error: no line");
}

TEST(EditorDiagnostics, CarriedToWhereTheirLinesMoved) {
  const std::string file = "f.cu (edited)";
  const std::vector<Diagnostic> v = {{file, 2, 4, "on b", false}, {file, 3, 2, "on c", false}, {"other.h", 2, 1, "x", false}};
  const std::vector<Diagnostic> c = carry_diagnostics(v, file, "a\nb\nc\n", "top\na\nb2\nc\n");
  EXPECT_EQ(c[0].line, 3);  // b was replaced by b2: the diagnostic stays with the line in its place
  EXPECT_EQ(c[0].col, 0);   // and its column is gone with the old line
  EXPECT_EQ(c[1].line, 4);  // c moved down one
  EXPECT_EQ(c[1].col, 2);
  EXPECT_EQ(c[2].line, 2);  // another file's line is not the editor's
}

TEST(EditorPersist, EscapingRoundTripsAnyText) {
  for (const std::string t : {std::string("a\nb"), std::string("\\n is not a newline\\"), std::string("\r\n\r\n"),
                              std::string("[KernelLadder][Settings]\n;x=1\n"), std::string("\xC2\xB7 \t tab"), std::string()}) {
    const std::string e = escape_line(t);
    EXPECT_EQ(e.find('\n'), std::string::npos);
    EXPECT_EQ(e.find('\r'), std::string::npos);
    EXPECT_EQ(unescape_line(e), t);
  }
  std::mt19937 rng(unsigned(test::next_seed()));
  for (int i = 0; i < 200; ++i) {
    std::string t;
    for (int k = int(rng() % 40); k > 0; --k) t += "\\\nnr\r x"[rng() % 8];
    EXPECT_EQ(unescape_line(escape_line(t)), t);
  }
}

TEST(EditorPersist, EditedRungsAndTheModeSurviveAndResetForgets) {
  Editor a;
  a.editing = true;
  a.frac = 0.7f;
  RungEdit& r = a.rungs["softmax"];
  r.shipped = "x\n", r.have_shipped = true, r.loaded = true;
  r.text = "y = \"\\n\"\nz\n", r.edited = true;
  RungEdit& same = a.rungs["vector-add"];
  same.shipped = same.text = "s\n", same.have_shipped = same.loaded = true;
  const std::vector<std::string> lines = settings_lines(a);
  ASSERT_EQ(lines.size(), 3u);  // the mode, the splitter and the one edited rung
  Editor b;
  for (const std::string& l : lines) {
    const size_t eq = l.find('=');
    EXPECT_TRUE(apply_setting(b, l.substr(0, eq), l.substr(eq + 1))) << l;
  }
  EXPECT_TRUE(b.editing);
  EXPECT_FLOAT_EQ(b.frac, 0.7f);
  ASSERT_EQ(b.rungs.count("softmax"), 1u);
  EXPECT_EQ(b.rungs["softmax"].text, r.text);
  EXPECT_EQ(b.rungs.count("vector-add"), 0u);
  EXPECT_FALSE(apply_setting(b, "param.softmax.n_cols", "5"));
  EXPECT_FALSE(apply_setting(b, "edit.", "5"));
}

// Through the settings store the window uses: an ini file written by Dear ImGui and read back.
TEST(EditorPersist, ThroughTheWindowsSettingsFile) {
  const std::string ini = test::tmp_dir() + "/editor-settings.ini";
  std::remove(ini.c_str());
  const std::string edited = "// an edit\n#include \"kl.cuh\"\n\tint x = 1; // \\ and = and [brackets]\n";
  {
    ImGui::CreateContext();
    ImGui::GetIO().IniFilename = nullptr;  // only the file the test names
    app::Shell s;
    s.panels = app::make_panels();
    {
      app::SettingsPersistence p(s, ini);
      s.editor.editing = true;
      set_text(s.editor, "softmax", edited);
      p.snapshot();
    }
    ImGui::SaveIniSettingsToDisk(ini.c_str());
    ImGui::DestroyContext();
  }
  std::ifstream f(ini);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find("edit.softmax="), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("editor=1\n"), std::string::npos) << ss.str();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  app::Shell s;
  s.panels = app::make_panels();
  { app::SettingsPersistence p(s, ini); }
  EXPECT_TRUE(s.editor.editing);
  ASSERT_EQ(s.editor.rungs.count("softmax"), 1u);
  EXPECT_EQ(s.editor.rungs["softmax"].text, edited);
  RungEdit& r = rung_state(s.editor, "softmax");
  EXPECT_TRUE(r.edited);
  EXPECT_NE(r.shipped, edited);
  ImGui::DestroyContext();
}

TEST(EditorHooks, EveryPanelsSourceNamesARungWithAShippedText) {
  int n = 0;
  for (const auto& p : app::make_panels()) {
    const std::string file = p->source_focus().file;
    if (file.empty()) continue;
    EXPECT_FALSE(default_hooks().shipped(rung_of_file(file)).empty()) << p->id() << " " << file;
    ++n;
  }
  EXPECT_EQ(rung_of_file("flash_attention_backward.cu"), "flash-attention-backward");
  EXPECT_GE(n, 6);
}

struct NoPanel : app::Panel {
  ParamValues v;
  std::string id() const override { return "x"; }
  std::string title() const override { return "x"; }
  ParamValues& params() override { return v; }
  void draw(app::AppContext&) override {}
};

TEST(EditorActions, WithoutACompilerTheEditIsKeptAndSaidPlainly) {
  EditorHooks none = default_hooks();
  none.compile_and_run = nullptr;  // hooks without a compiler (the product's default has one)
  install_hooks(none);
  Editor e;
  NoPanel p;
  set_text(e, "vector-add", "edited\n");
  compile_and_run(e, p, app::AppContext{}, "vector-add");
  const RungEdit& r = e.rungs["vector-add"];
  EXPECT_EQ(r.result.kind, RunResult::Kind::Refused);
  EXPECT_EQ(r.status, "not run: no compiler is wired to the editor here; the edit is kept; the views still show the shipped kernel");
  EXPECT_NE(stale_reason(e, "vector-add").find("which was not run"), std::string::npos);
  EXPECT_FALSE(r.status_ok);
  EXPECT_TRUE(r.edited);
}

TEST(EditorActions, DiagnosticsFaultsCleanRunsAndReset) {
  install_hooks(test::canned_editor_hooks());
  Editor e;
  NoPanel p;
  RungEdit& r = rung_state(e, "vector-add");
  const std::string shipped = r.shipped;
  ASSERT_FALSE(shipped.empty());
  EXPECT_FALSE(r.edited);
  compile_and_run(e, p, app::AppContext{}, "vector-add");
  EXPECT_EQ(r.result.kind, RunResult::Kind::Ran);
  EXPECT_EQ(r.status, "ran the edited kernel: views redrawn");
  EXPECT_TRUE(r.status_ok);

  set_text(e, "vector-add", "  int typo = undefined_name;\n" + shipped);
  EXPECT_TRUE(r.edited);
  compile_and_run(e, p, app::AppContext{}, "vector-add");
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].line, 1);
  EXPECT_EQ(r.diagnostics[0].col, 3);
  EXPECT_EQ(r.status, "1 compile error: the marked lines say what; the views still show the last edited kernel that ran");
  // The views are stale: they show the last run's kernel, not the text that did not compile.
  EXPECT_EQ(stale_reason(e, "vector-add"),
            "these views show the last edited kernel that ran, not the edit in the source pane, which does not compile");

  set_text(e, "vector-add", shipped + "// KL_CANNED_FAULT\n");
  compile_and_run(e, p, app::AppContext{}, "vector-add");
  EXPECT_EQ(r.status, "run-time fault: out-of-bounds store to out[1000] (size 1000) by program 0, lane 1000");
  EXPECT_FALSE(r.status_ok);

  reset(e, p, "vector-add");
  EXPECT_EQ(r.text, shipped);
  EXPECT_FALSE(r.edited);
  EXPECT_FALSE(r.ran);
  for (const std::string& l : settings_lines(e)) EXPECT_EQ(l.rfind("edit.", 0), std::string::npos) << l;
  install_hooks(default_hooks());
}

// Reset and a loaded bug replace the text in one undo step: Ctrl+Z brings the edit back (Reset asked
// nothing and could not be undone); redo goes forward again.
TEST(EditorActions, ResetAndReplacedTextsAreUndoneInOneStep) {
  install_hooks(test::canned_editor_hooks());
  Editor e;
  NoPanel p;
  RungEdit& r = rung_state(e, "vector-add");
  const std::string shipped = r.shipped;
  set_text(e, "vector-add", "my edit\n");
  reset(e, p, "vector-add");
  EXPECT_EQ(r.text, shipped);
  EXPECT_NE(r.status.find("Ctrl+Z"), std::string::npos) << r.status;
  EXPECT_TRUE(undo(e, "vector-add"));
  EXPECT_EQ(r.text, "my edit\n");
  EXPECT_TRUE(r.edited);
  EXPECT_TRUE(redo(e, "vector-add"));
  EXPECT_EQ(r.text, shipped);
  EXPECT_TRUE(undo(e, "vector-add"));
  EXPECT_TRUE(undo(e, "vector-add"));
  EXPECT_EQ(r.text, shipped);  // before the edit
  EXPECT_FALSE(undo(e, "vector-add"));
  install_hooks(default_hooks());
}

// A run of an edited kernel (or a fault in it) changes every panel's settings key, so the views are
// drawn again; a compile error or a refusal changes nothing.
TEST(EditorActions, ARunRedrawsThePanelsACompileErrorDoesNot) {
  install_hooks(test::canned_editor_hooks());
  auto panels = app::make_panels();
  ParamValues& v = panels[0]->params();
  auto key = [&] { return app::ui::settings_key(v, {"n"}, Backend::Cpu); };
  Editor e;
  NoPanel p;
  const std::string k0 = key();
  set_text(e, "vector-add", "broken\n");
  compile_and_run(e, p, app::AppContext{}, "vector-add");
  EXPECT_EQ(key(), k0);
  reset(e, p, "vector-add");
  compile_and_run(e, p, app::AppContext{}, "vector-add");
  const std::string k1 = key();
  EXPECT_NE(k1, k0);
  EXPECT_NE(k1.find("/src"), std::string::npos) << k1;
  install_hooks(default_hooks());
}

}  // namespace
}  // namespace kl
