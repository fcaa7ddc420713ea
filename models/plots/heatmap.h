#pragma once
// Pictures of attention: a standalone SVG heatmap (source tokens along x, output tokens along
// y, colour bar) and a terminal rendering with Unicode shade blocks.
#include <string>
#include <vector>

namespace tg::models {

/// weights[i][j] = attention of output token i on source token j (rows need not sum to 1).
struct AttentionMap {
  std::vector<std::string> source;  // x labels
  std::vector<std::string> output;  // y labels
  std::vector<std::vector<float>> weights;
};

/// Validates that weights is output.size() x source.size(); throws std::invalid_argument otherwise.
void check_attention_map(const AttentionMap& map);

/// A standalone SVG document sized to the sentence: one cell per weight (its value in a
/// `data-weight` attribute and a tooltip), rotated source labels, a colour bar from 0 to 1.
std::string attention_heatmap_svg(const AttentionMap& map, const std::string& title = "");

/// Rows of shade blocks (" ░▒▓█") with the output token at the left and source tokens listed
/// underneath, for `translate --show-attention`.
std::string attention_terminal(const AttentionMap& map);

/// Viridis-like colour for v in [0, 1] as "#rrggbb".
std::string colour_for(float v);

/// Number of code points in a UTF-8 string, to size the room for SVG labels.
std::size_t display_width(const std::string& s);

/// A coordinate or length for SVG attributes, two decimals ("12.35").
std::string svg_number(double v);

/// The start of a standalone SVG document of the given size (XML declaration, <svg> with a
/// viewBox, the font, a white background); the caller appends the content and "</svg>\n".
std::string svg_begin(double width, double height, double font_size);

/// Escapes &, <, >, " and ' for XML text and attributes.
std::string xml_escape(const std::string& s);

}  // namespace tg::models
