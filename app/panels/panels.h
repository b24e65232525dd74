// Factories for every panel, in ladder order (app/panels/panels.cpp lists them).
#pragma once
#include <memory>

#include "app/panel.h"

namespace kl::app {
std::unique_ptr<Panel> make_vector_add_panel();
std::unique_ptr<Panel> make_transpose_panel();
std::unique_ptr<Panel> make_relu_dropout_panel();
std::unique_ptr<Panel> make_softmax_panel();
std::unique_ptr<Panel> make_attention_panel();
std::unique_ptr<Panel> make_flash_attention_panel();
std::unique_ptr<Panel> make_backward_panel();
std::unique_ptr<Panel> make_measure_panel();
}  // namespace kl::app
