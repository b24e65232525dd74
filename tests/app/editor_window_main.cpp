// kernel-ladder with the canned editor hooks of tests/app/editor_test_hooks.h (a test binary: the
// driven window test and the editor's layout views use it until the editable kernels are merged).
#include "app/cli/cli.h"
#include "app/editor/hooks.h"
#include "editor_test_hooks.h"

int main(int argc, char** argv) {
  kl::app::editor::install_hooks(kl::test::canned_editor_hooks());
  return kl::app::run_cli(argc, argv);
}
