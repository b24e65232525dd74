#include "app/panels/panels.h"

namespace kl::app {

std::vector<std::unique_ptr<Panel>> make_panels() {
  std::vector<std::unique_ptr<Panel>> p;
  p.push_back(make_vector_add_panel());
  p.push_back(make_transpose_panel());  // rung 1½
  p.push_back(make_relu_dropout_panel());
  p.push_back(make_softmax_panel());
  p.push_back(make_attention_panel());
  p.push_back(make_flash_attention_panel());
  p.push_back(make_backward_panel());
  p.push_back(make_measure_panel());
  return p;
}

}  // namespace kl::app
