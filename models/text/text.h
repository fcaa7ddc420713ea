#pragma once
// Text preprocessing and vocabulary for the translator, compatible with d2l's `preprocess_nmt`,
// `tokenize_nmt` and `Vocab` (d2l.ai, "Machine Translation and the Dataset"):
//
//   auto tokens = tg::models::tokenize_nmt(tg::models::preprocess_nmt("Go."));  // {"go", "."}
//   auto vocab = tg::models::Vocab::build(sentences, /*min_freq=*/2);
//   std::vector<std::int64_t> ids = vocab.ids(tokens);
//
// All text is UTF-8. Characters are Unicode code points, as Python's str indexes them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tg::models {

// ---- UTF-8 -------------------------------------------------------------------------------

/// Byte offset of the first invalid UTF-8 sequence in `text` (overlong forms, surrogates and
/// code points above U+10FFFF are invalid), or std::string_view::npos if `text` is valid.
std::size_t find_invalid_utf8(std::string_view text);
/// Decodes valid UTF-8 into code points; throws std::invalid_argument on invalid input.
std::u32string utf8_decode(std::string_view text);
/// Encodes code points as UTF-8; throws std::invalid_argument on a surrogate or > U+10FFFF.
std::string utf8_encode(std::u32string_view text);

// ---- preprocessing and tokenisation ------------------------------------------------------

/// Unicode simple lower-casing of UTF-8 text with glibc's towlower_l in the C.UTF-8 locale
/// ("À" → "à", "Đ" → "đ"). One code point maps to one code point, so it differs from Python's
/// str.lower() only in the special cases ("İ" gives "i", Python "i̇"; capital sigma always gives
/// "σ", Python "ς" at the end of a word). Throws on invalid UTF-8.
std::string to_lower_utf8(std::string_view text);

/// d2l's preprocess_nmt on a piece of text: U+202F and U+00A0 become ' ', the text is lower-cased
/// (to_lower_utf8), and a ' ' is inserted before each of , . ! ? whose previous character is not
/// ' ' (never before the character at index 0). "Go.\tVa !" → "go .\tva !". Throws on invalid
/// UTF-8.
///
/// d2l runs this over the whole file, so the first character of a line sees the previous line's
/// '\n' as its predecessor; the data reader runs it per line ("src\ttgt"), so a line that starts
/// with , . ! ? gets no space. No line of fra.txt or vie.txt starts that way.
std::string preprocess_nmt(std::string_view text);

/// Python's text.split(sep): every separator splits, so adjacent separators give empty parts.
/// The views point into `text`.
std::vector<std::string_view> split_views(std::string_view text, char sep);

/// Python's `s.split(' ')`: splits on every single ' ', keeping empty fields ("a  b" →
/// {"a", "", "b"}, "" → {""}).
std::vector<std::string> split_on_space(std::string_view text);

/// Tokens of one preprocessed sentence as d2l's tokenize_nmt: split_on_space, so double spaces
/// and leading/trailing spaces give empty tokens exactly as in d2l. One deliberate difference:
/// the empty sentence has no tokens (d2l would give one empty token ""); file readers reject
/// empty sentences, so this only concerns generated data such as a "primes" target without primes.
std::vector<std::string> tokenize_nmt(std::string_view sentence);

// ---- vocabulary --------------------------------------------------------------------------

/// Token ↔ id mapping with d2l's reserved tokens and ordering: `<unk>`=0, `<pad>`=1, `<bos>`=2,
/// `<eos>`=3, then the corpus tokens by descending frequency, ties in order of first appearance
/// (Python's stable sort over a Counter), tokens rarer than min_freq dropped. Unknown tokens map
/// to `<unk>`.
class Vocab {
 public:
  static constexpr std::int64_t kUnk = 0;
  static constexpr std::int64_t kPad = 1;
  static constexpr std::int64_t kBos = 2;
  static constexpr std::int64_t kEos = 3;
  /// The reserved tokens, in id order.
  static const std::vector<std::string>& reserved_tokens();

  /// Only the four reserved tokens.
  Vocab();
  /// d2l's Vocab(sentences, min_freq, reserved_tokens=['<pad>', '<bos>', '<eos>']). A corpus token
  /// equal to a reserved token keeps the reserved id. min_freq must be >= 0.
  static Vocab build(const std::vector<std::vector<std::string>>& sentences, std::int64_t min_freq = 2);
  /// From the full id → token list, which must start with the reserved tokens and have no
  /// duplicates; throws std::invalid_argument otherwise.
  static Vocab from_tokens(std::vector<std::string> idx_to_token);

  /// Number of tokens, reserved ones included.
  std::int64_t size() const { return static_cast<std::int64_t>(idx_to_token_.size()); }
  /// Id of `token`, or kUnk if it is not in the vocabulary.
  std::int64_t id(const std::string& token) const;
  /// Same as id(token).
  std::int64_t operator[](const std::string& token) const { return id(token); }
  /// True if `token` has its own id.
  bool contains(const std::string& token) const { return token_to_idx_.count(token) != 0; }
  /// Ids of a token sequence (unknown → kUnk).
  std::vector<std::int64_t> ids(const std::vector<std::string>& tokens) const;
  /// Token of one id; throws std::out_of_range for an id outside [0, size()).
  const std::string& token(std::int64_t id) const;
  /// Tokens of an id sequence (d2l's to_tokens); throws std::out_of_range on a bad id.
  std::vector<std::string> to_tokens(const std::vector<std::int64_t>& ids) const;
  /// All tokens in id order.
  const std::vector<std::string>& tokens() const { return idx_to_token_; }

  /// Writes one token per line (line i holds the token of id i), each line ending in '\n',
  /// atomically (nn::io::write_file_atomic: a failed save leaves the previous file whole).
  /// Throws std::runtime_error naming the file if it cannot be written.
  void save(const std::string& path) const;
  /// Reads a file written by save(). A missing, empty or malformed file (reserved tokens missing,
  /// duplicate token, invalid UTF-8), one that is not a regular file or is above
  /// nn::io::limits::kVocabulary (64 MiB), a line above kLineBytes (1 MiB) and a read error throw
  /// std::runtime_error naming the file (and line).
  static Vocab load(const std::string& path);

  friend bool operator==(const Vocab& a, const Vocab& b) { return a.idx_to_token_ == b.idx_to_token_; }

 private:
  void add(const std::string& token);
  std::vector<std::string> idx_to_token_;
  std::unordered_map<std::string, std::int64_t> token_to_idx_;
};

}  // namespace tg::models
