#pragma once
// The attention map both SVG tests draw (heatmap and per-step bars), and a check for optional tools.
#include <cstdlib>
#include <string>

#include "models/plots/heatmap.h"

namespace tg::models::testing {

/// "je suis chez moi ." <- "i'm home ." with known weights (rows sum to 1).
inline AttentionMap sample_attention() {
  return {.source = {"je", "suis", "chez", "moi", ".", "<eos>"},
          .output = {"i'm", "home", ".", "<eos>"},
          .weights = {{0.7f, 0.2f, 0.05f, 0.05f, 0.0f, 0.0f},
           {0.0f, 0.1f, 0.5f, 0.4f, 0.0f, 0.0f},
           {0.0f, 0.0f, 0.0f, 0.1f, 0.9f, 0.0f},
           {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f}}};
}

/// Whether `cmd` is on the PATH (tests that need rsvg-convert or python3 skip without it).
inline bool have(const char* cmd) {
  return std::system((std::string("command -v ") + cmd + " >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace tg::models::testing
