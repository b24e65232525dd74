#include "app/editor/hooks.h"

#include "app/panel.h"
#include "assets/embedded.h"
#include "kernels/editable/compile.h"
#include "kernels/editable/launch.h"
#include "kernels/studies/study.h"

namespace kl::app::editor {

std::string rung_of_file(const std::string& file) {
  std::string r = file.substr(0, file.rfind('.'));
  for (char& c : r)
    if (c == '_') c = '-';
  return r;
}

std::string edited_file_name(const std::string& rung) {
  std::string f = rung;
  for (char& c : f)
    if (c == '-') c = '_';
  return f + ".cu (edited)";
}

namespace {

std::string without_trailing_zeros(std::string text) {
  while (!text.empty() && text.back() == '\0') text.pop_back();  // embedded assets end in a zero byte
  return text;
}

// The panel's study run once with the edited kernel held for its rung; its "edited kernel: " line is the
// kernel's run-time fault, as `shot --source` reads it.
RunResult run_study(Panel& panel, const AppContext& ctx) {
  RunResult r;
  r.kind = RunResult::Kind::Ran;
  const study::Entry* s = study::find(panel.id());
  if (!s) return r;
  for (const std::string& line : s->run(ctx.backend.backend, panel.params()).lines)
    if (line.rfind("edited kernel: ", 0) == 0) r.kind = RunResult::Kind::Fault, r.message = line.substr(15);
  return r;
}

RunResult compile_and_run(Panel& panel, const AppContext& ctx, const std::string& rung, const std::string& file,
                          const std::string& text) {
  if (editable::shipped_source(rung).empty()) {
    RunResult r;
    r.message = rung + " has no editable source in this build";
    return r;
  }
  const editable::Source src{rung, file, text};
  try {
    editable::check_compiles(ctx.backend.backend, src);
  } catch (const editable::CompileError& e) {
    RunResult r;
    r.kind = RunResult::Kind::CompileErrors;
    for (const editable::Diagnostic& d : e.diagnostics) r.diagnostics.push_back({d.file, d.line, d.col, d.message, false});
    return r;
  }
  editable::set_edited(src);
  return run_study(panel, ctx);
}

std::vector<GalleryItem> gallery_of(const std::string& rung) {
  std::vector<GalleryItem> v;
  for (const editable::GalleryBug& b : editable::gallery(rung)) v.push_back({b.name, b.sentence, b.text});
  return v;
}

}  // namespace

// The product's hooks: the editable runtime (kernels/editable) compiles in its worker process, never here.
EditorHooks default_hooks() {
  EditorHooks h;
  h.shipped = [](const std::string& rung) {
    std::string text = without_trailing_zeros(editable::shipped_source(rung));
    if (!text.empty()) return text;
    std::string file = rung;  // a rung without an editable source shows its kernels/rungs file, read-only
    for (char& c : file)
      if (c == '-') c = '_';
    return without_trailing_zeros(std::string(assets::find("source/" + file + ".cu")));
  };
  h.shipped_path = [](const std::string& rung) {
    const std::string f = editable::shipped_file(rung);
    if (!f.empty()) return "kernels/editable/sources/" + f;
    std::string file = rung;
    for (char& c : file)
      if (c == '-') c = '_';
    return "kernels/rungs/" + file + ".cu";
  };
  h.compile_and_run = compile_and_run;
  h.use_shipped = [](Panel&, const std::string& rung) { editable::reset_edited(rung); };
  h.gallery = gallery_of;
  return h;
}

namespace {
EditorHooks& installed() {
  static EditorHooks h = default_hooks();
  return h;
}
}  // namespace

void install_hooks(EditorHooks h) { installed() = std::move(h); }
const EditorHooks& hooks() { return installed(); }

}  // namespace kl::app::editor
