#include "models/text/text.h"

#include "autograd/error_text.h"
#include "nn/file_io.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace tg::models {

namespace {

// Decodes one UTF-8 sequence at text[i]; returns its length (0 if invalid) and sets `cp`.
std::size_t decode_one(std::string_view text, std::size_t i, char32_t& cp) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  std::size_t len;
  char32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, min = 0x80, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, min = 0x800, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, cp = b0 & 0x07;
  } else {
    return 0;  // continuation byte or 0xF8..0xFF as a lead byte
  }
  if (i + len > text.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;  // overlong, range, surrogate
  return len;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    if (cp >= 0xD800 && cp <= 0xDFFF) throw std::invalid_argument("utf8_encode: surrogate code point");
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp <= 0x10FFFF) {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    throw std::invalid_argument("utf8_encode: code point above U+10FFFF");
  }
}

// The C.UTF-8 locale, created once (thread-safe static init) and freed at exit. Only
// towlower_l uses it, so the process-wide locale is never touched.
class Utf8Locale {
 public:
  Utf8Locale() : loc_(newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr))) {}
  ~Utf8Locale() {
    if (loc_) freelocale(loc_);
  }
  Utf8Locale(const Utf8Locale&) = delete;
  Utf8Locale& operator=(const Utf8Locale&) = delete;
  locale_t get() const {
    if (!loc_) throw std::runtime_error("to_lower_utf8: the C.UTF-8 locale is not available (newlocale failed)");
    return loc_;
  }

 private:
  locale_t loc_;
};

locale_t utf8_locale() {
  static const Utf8Locale loc;
  return loc.get();
}

void lower_in_place(std::u32string& text) {
  const locale_t loc = utf8_locale();
  for (char32_t& c : text) {
    if (c < 0x80) {
      if (c >= 'A' && c <= 'Z') c += 'a' - 'A';  // fast path, same result as towlower_l
    } else {
      c = static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), loc));
    }
  }
}

}  // namespace

std::size_t find_invalid_utf8(std::string_view text) {
  char32_t cp;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = decode_one(text, i, cp);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::u32string utf8_decode(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp;
    const std::size_t len = decode_one(text, i, cp);
    if (len == 0) throw std::invalid_argument("invalid UTF-8 at byte " + std::to_string(i));
    out += cp;
    i += len;
  }
  return out;
}

std::string utf8_encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_utf8(out, cp);
  return out;
}

std::string to_lower_utf8(std::string_view text) {
  std::u32string cps = utf8_decode(text);
  lower_in_place(cps);
  return utf8_encode(cps);
}

std::string preprocess_nmt(std::string_view text) {
  // One pass straight from UTF-8 to UTF-8 (no code-point buffers): this runs over every line
  // of a 167k-line corpus.
  const locale_t loc = utf8_locale();
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  char32_t prev = 0;
  for (std::size_t i = 0; i < text.size();) {
    char32_t c;
    const std::size_t len = decode_one(text, i, c);
    if (len == 0) throw std::invalid_argument("preprocess_nmt: invalid UTF-8 at byte " + std::to_string(i));
    if (c == U'\u202F' || c == U'\u00A0') {
      c = U' ';
    } else if (c < 0x80) {
      if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
    } else {
      c = static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), loc));
    }
    // d2l's no_space(char, prev_char) on the replaced, lower-cased text; index 0 never gets a space.
    const bool punct = c == U',' || c == U'.' || c == U'!' || c == U'?';
    if (i > 0 && punct && prev != U' ') out += ' ';
    append_utf8(out, c);
    prev = c;
    i += len;
  }
  return out;
}

std::vector<std::string_view> split_views(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t pos; (pos = text.find(sep, start)) != std::string_view::npos; start = pos + 1)
    parts.push_back(text.substr(start, pos - start));
  parts.push_back(text.substr(start));
  return parts;
}

std::vector<std::string> split_on_space(std::string_view text) {
  const auto views = split_views(text, ' ');
  return {views.begin(), views.end()};
}

std::vector<std::string> tokenize_nmt(std::string_view sentence) {
  if (sentence.empty()) return {};
  return split_on_space(sentence);
}

// ---- Vocab -------------------------------------------------------------------------------

const std::vector<std::string>& Vocab::reserved_tokens() {
  static const std::vector<std::string> tokens{"<unk>", "<pad>", "<bos>", "<eos>"};
  return tokens;
}

Vocab::Vocab() {
  for (const std::string& t : reserved_tokens()) add(t);
}

void Vocab::add(const std::string& token) {
  token_to_idx_.emplace(token, size());
  idx_to_token_.push_back(token);
}

Vocab Vocab::build(const std::vector<std::vector<std::string>>& sentences, std::int64_t min_freq) {
  if (min_freq < 0) throw std::invalid_argument("Vocab::build: min_freq must be >= 0, got " + std::to_string(min_freq));
  // Counter in order of first appearance, then a stable sort by descending count: the same
  // order as Python's sorted(counter.items(), key=count, reverse=True).
  std::unordered_map<std::string, std::size_t> slot;
  std::vector<std::pair<std::string, std::int64_t>> counts;
  for (const auto& sentence : sentences) {
    for (const std::string& token : sentence) {
      auto [it, inserted] = slot.emplace(token, counts.size());
      if (inserted) counts.emplace_back(token, 0);
      ++counts[it->second].second;
    }
  }
  std::stable_sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  Vocab vocab;
  for (const auto& [token, count] : counts) {
    if (count < min_freq) break;
    if (!vocab.contains(token)) vocab.add(token);
  }
  return vocab;
}

Vocab Vocab::from_tokens(std::vector<std::string> idx_to_token) {
  const auto& reserved = reserved_tokens();
  if (idx_to_token.size() < reserved.size() ||
      !std::equal(reserved.begin(), reserved.end(), idx_to_token.begin())) {
    throw std::invalid_argument("Vocab::from_tokens: the first tokens must be <unk>, <pad>, <bos>, <eos>");
  }
  Vocab vocab;
  for (std::size_t i = reserved.size(); i < idx_to_token.size(); ++i) {
    if (vocab.contains(idx_to_token[i])) {
      throw std::invalid_argument("Vocab::from_tokens: duplicate token '" + elide(idx_to_token[i]) + "' at id " +
                                  std::to_string(i));
    }
    vocab.add(idx_to_token[i]);
  }
  return vocab;
}

std::int64_t Vocab::id(const std::string& token) const {
  auto it = token_to_idx_.find(token);
  return it == token_to_idx_.end() ? kUnk : it->second;
}

std::vector<std::int64_t> Vocab::ids(const std::vector<std::string>& tokens) const {
  std::vector<std::int64_t> out;
  out.reserve(tokens.size());
  for (const std::string& t : tokens) out.push_back(id(t));
  return out;
}

const std::string& Vocab::token(std::int64_t id) const {
  if (id < 0 || id >= size()) {
    throw std::out_of_range("Vocab::token: id " + std::to_string(id) + " outside [0, " + std::to_string(size()) + ")");
  }
  return idx_to_token_[static_cast<std::size_t>(id)];
}

std::vector<std::string> Vocab::to_tokens(const std::vector<std::int64_t>& ids) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (std::int64_t i : ids) out.push_back(token(i));
  return out;
}

void Vocab::save(const std::string& path) const {
  // One token per line: a token holding '\n' could not be read back. Checked before the file
  // is touched, so a failed save leaves no partial file.
  for (std::size_t i = 0; i < idx_to_token_.size(); ++i) {
    if (idx_to_token_[i].find('\n') != std::string::npos) {
      throw std::runtime_error(path + ": cannot save token " + std::to_string(i) + ": it contains a newline");
    }
  }
  // What load() reads back: every line within nn::io::limits::kLineBytes and the file within
  // kVocabulary. Checked here, so a vocabulary is never saved in a form its loader refuses.
  std::string text;
  for (std::size_t i = 0; i < idx_to_token_.size(); ++i) {
    if (idx_to_token_[i].size() > nn::io::limits::kLineBytes)
      throw std::runtime_error(path + ": cannot save token " + std::to_string(i) + ": " +
                               std::to_string(idx_to_token_[i].size()) + " bytes, above the line limit of " +
                               std::to_string(nn::io::limits::kLineBytes) + " that Vocab::load reads");
    text.append(idx_to_token_[i]).append(1, '\n');
    if (text.size() > nn::io::limits::kVocabulary)
      throw std::runtime_error(path + ": cannot save " + std::to_string(idx_to_token_.size()) +
                               " tokens: the file would be above the limit of 64 MiB that Vocab::load reads");
  }
  nn::io::write_file_atomic(path, text);  // a failed save leaves the previous file whole
}

Vocab Vocab::load(const std::string& path) {
  // Only a regular file within nn::io::limits::kVocabulary, each line within kLineBytes; a read
  // error is an error. Lines as getline reads them: a final '\n' ends the last line, it does not
  // start a new one. An empty line in the middle is the (legal) empty token.
  const std::vector<std::string> lines = nn::io::read_lines(path, nn::io::limits::kVocabulary);
  if (lines.empty()) throw std::runtime_error(path + ": empty vocabulary file");
  const auto& reserved = reserved_tokens();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string where = path + ":" + std::to_string(i + 1) + ": ";
    if (find_invalid_utf8(lines[i]) != std::string_view::npos) {
      throw std::runtime_error(where + "invalid UTF-8 in vocabulary file");
    }
    if (i < reserved.size() && lines[i] != reserved[i]) {
      throw std::runtime_error(where + "expected reserved token '" + reserved[i] + "', found '" + elide(lines[i], 32) +
                               "'");
    }
  }
  if (lines.size() < reserved.size()) {
    throw std::runtime_error(path + ": malformed vocabulary file: " + std::to_string(lines.size()) +
                             " lines, fewer than the 4 reserved tokens");
  }
  Vocab vocab;
  for (std::size_t i = reserved.size(); i < lines.size(); ++i) {
    if (vocab.contains(lines[i])) {
      throw std::runtime_error(path + ":" + std::to_string(i + 1) + ": duplicate token '" + elide(lines[i]) +
                               "' in vocabulary file");
    }
    vocab.add(lines[i]);
  }
  return vocab;
}

}  // namespace tg::models
