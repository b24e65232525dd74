// A panel: one view of one rung (or the Measure view). The app opens an ImGui window per panel and
// calls draw(); `shot PANEL --set key=value` sets params() first. Panels recompute when their
// parameters change, catch InputError/RuntimeError and show them (ui::error_box), never abort.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/runtime/backend.h"
#include "kernels/runtime/params.h"

namespace kl::app {

struct AppContext {
  BackendChoice backend;
  DeviceInfo device;
  bool headless = false;
  long frame = 0;
};

class Panel {
 public:
  virtual ~Panel() = default;
  virtual std::string id() const = 0;     // as typed after `shot`: "vector-add"
  virtual std::string title() const = 0;  // as shown: "1 · Vector add"
  virtual ParamValues& params() = 0;      // every control of the panel, validated
  virtual void draw(AppContext& ctx) = 0; // content of the panel's window

  // Named settings the tour renders this panel at, in order ("n_cols=2000", ...). Each stop is a
  // file-name-safe name and the --set strings applied on top of the defaults.
  struct TourStop {
    std::string name;
    std::vector<std::string> settings;
  };
  virtual std::vector<TourStop> tour_stops() const { return {{"default", {}}}; }

  // Named animations of this panel (`tour --animate` writes them as GIFs): one parameter walked
  // through "KEY=FROM..TO[:STEP]" (as `animate --vary` takes it) on top of the defaults and `settings`.
  struct Animation {
    std::string name;
    std::string vary;
    std::vector<std::string> settings;
    int fps = 4;
  };
  virtual std::vector<Animation> animations() const { return {}; }

  // The kernel source shown beside the view (embedded at build time): a file of kernels/rungs/ and the
  // functions the view is about, whose lines are highlighted ("vector_add.cu", {"vector_add_traced"}).
  // A view that draws a kernel no one edits here (the Timeline tabs: the fast kernel's recording) names it
  // read-only: `file` is then shown as it is, never in the editor, and instead of functions the code of the
  // phases in `stamps` is highlighted (app/editor/stamps.h; none: every line that stamps a phase), said in
  // the pane's header by `highlighted`.
  struct SourceFocus {
    std::string file;
    std::vector<std::string> functions;
    bool read_only = false;
    std::vector<std::string> stamps;
    std::string highlighted;
  };
  virtual SourceFocus source_focus() const { return {}; }
};

// In ladder order; defined in app/panels/panels.cpp.
std::vector<std::unique_ptr<Panel>> make_panels();

}  // namespace kl::app
