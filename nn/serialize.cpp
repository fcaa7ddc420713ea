#include "nn/serialize.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>

#include "autograd/error_text.h"
#include "nn/file_io.h"

namespace tg::nn {

static_assert(std::endian::native == std::endian::little, ".npy I/O assumes a little-endian host");

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes
constexpr std::size_t kMagicLen = 6;

[[noreturn]] void fail(const std::string& what, const std::string& why) {
  throw std::runtime_error(what + ": " + why);
}

// ---- .npy header ------------------------------------------------------------------------------

std::string shape_tuple(const Shape& s) {
  if (s.size() == 0) return "()";
  std::string out = "(";
  for (int i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

/// Minimal parser of the Python dict literal in a .npy header:
/// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  void parse(std::string& descr, bool& fortran, std::vector<std::int64_t>& shape) {
    bool has_descr = false, has_fortran = false, has_shape = false;
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') break;
      const std::string key = string();
      expect(':');
      ws();
      if (key == "descr") {
        descr = string();
        has_descr = true;
      } else if (key == "fortran_order") {
        fortran = boolean();
        has_fortran = true;
      } else if (key == "shape") {
        shape = tuple();
        has_shape = true;
      } else {
        bad("unknown key '" + elide(key) + "'");
      }
      ws();
      if (peek() == ',') ++i_;
      else if (peek() != '}') bad("expected ',' or '}'");
    }
    if (!has_descr || !has_fortran || !has_shape)
      bad("header lacks one of 'descr', 'fortran_order', 'shape'");
  }

 private:
  [[noreturn]] void bad(const std::string& why) {
    fail(what_, "bad .npy header (" + why + " at column " + std::to_string(i_) + ")\n  header: " + elide(s_, 80));
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    ws();
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string() {
    ws();
    const char quote = peek();
    if (quote != '\'' && quote != '"') bad("expected a string");
    const auto end = s_.find(quote, i_ + 1);
    if (end == std::string_view::npos) bad("unterminated string");
    std::string out(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.substr(i_, 4) == "True") return i_ += 4, true;
    if (s_.substr(i_, 5) == "False") return i_ += 5, false;
    bad("expected True or False");
  }
  std::vector<std::int64_t> tuple() {
    std::vector<std::int64_t> out;
    expect('(');
    while (true) {
      ws();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') bad("expected a non-negative integer");
      std::int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) bad("dimension too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (peek() == 'L') ++i_;  // Python 2 longs
      out.push_back(v);
      ws();
      if (peek() == ',') ++i_;
      else if (peek() != ')') bad("expected ',' or ')'");
    }
    ++i_;
    return out;
  }

  std::string_view s_;
  const std::string& what_;
  std::size_t i_ = 0;
};

template <class T> std::uint64_t read_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// ---- zip helpers ------------------------------------------------------------------------------

std::string zip_code_message(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string msg = zip_error_strerror(&error);
  zip_error_fini(&error);
  return msg;
}

void write_archive(const std::string& tmp, const std::vector<std::pair<std::string, Tensor>>& entries,
                   const std::vector<std::string>& blobs) {
  if (entries.empty()) {
    // libzip deletes archives without entries instead of writing them; an empty .npz is just
    // the 22-byte end-of-central-directory record.
    const char eocd[22] = {'P', 'K', 5, 6};
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(eocd, sizeof(eocd));
    out.close();
    if (!out) throw std::runtime_error("cannot write " + tmp);
    return;
  }
  int code = 0;
  // ZIP_TRUNCATE: `tmp` is the empty temporary write_file_atomic_with has just created.
  zip_t* za = zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  if (!za) throw std::runtime_error("cannot create " + tmp + ": " + zip_code_message(code));
  auto abort = [&](const std::string& why) {
    zip_discard(za);
    throw std::runtime_error(why);
  };
  for (std::size_t i = 0; i < entries.size(); ++i) {
    // The blobs outlive zip_close, so libzip can read them in place (no copy).
    zip_source_t* src = zip_source_buffer(za, blobs[i].data(), blobs[i].size(), 0);
    if (!src) abort("entry '" + entries[i].first + "': " + zip_strerror(za));
    const zip_int64_t index = zip_file_add(za, (entries[i].first + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(src);
      abort("entry '" + entries[i].first + "': " + zip_strerror(za));
    }
    // Stored, like np.savez: loading is a memcpy and numpy can memory-map nothing less.
    if (zip_set_file_compression(za, static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0) < 0)
      abort("entry '" + entries[i].first + "': " + zip_strerror(za));
  }
  if (zip_close(za) < 0) abort(std::string("writing the archive failed: ") + zip_strerror(za));
}

}  // namespace

// ---- .npy -------------------------------------------------------------------------------------

namespace {

// "value V (element I) overflows float32" for the first finite float64 value that float32 cannot
// hold (it would be written as inf), or nothing.
std::optional<std::string> float32_overflow(const Tensor& t) {
  if (t.dtype() != DType::f64 || t.numel() == 0) return std::nullopt;
  const double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (std::isfinite(p[i]) && std::isinf(static_cast<float>(p[i]))) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", p[i]);
      return std::string("value ") + value + " (element " + std::to_string(i) + ") overflows float32";
    }
  return std::nullopt;
}

}  // namespace

std::string npy_encode(const Tensor& tensor) {
  if (!tensor.defined()) throw std::invalid_argument("npy_encode: undefined tensor");
  if (auto bad = float32_overflow(tensor))
    throw std::invalid_argument("npy_encode: " + tensor.shape().str() + " float64 tensor: " + *bad);
  const bool floating = is_floating(tensor.dtype());
  const bool boolean = tensor.dtype() == DType::b8;
  std::string dict = std::string("{'descr': '") + (floating ? "<f4" : boolean ? "|b1" : "<i8") +
                     "', 'fortran_order': False, 'shape': " + shape_tuple(tensor.shape()) + ", }";
  // Pad with spaces and end with '\n' so that the data starts 64-byte aligned, as numpy does.
  auto header_for = [&](std::size_t prefix) {
    std::string h = dict;
    const std::size_t total = prefix + h.size() + 1;
    h.append((64 - total % 64) % 64, ' ');
    h += '\n';
    return h;
  };
  std::string header = header_for(10);
  const bool v2 = header.size() > 65535;
  if (v2) header = header_for(12);

  const std::size_t n = static_cast<std::size_t>(tensor.numel());
  const std::size_t data_bytes = n * (floating ? 4 : boolean ? 1 : 8);
  std::string out;
  out.reserve(12 + header.size() + data_bytes);
  out.append(kMagic, kMagicLen);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  if (v2) {
    const auto len = static_cast<std::uint32_t>(header.size());
    out.append(reinterpret_cast<const char*>(&len), 4);
  } else {
    const auto len = static_cast<std::uint16_t>(header.size());
    out.append(reinterpret_cast<const char*>(&len), 2);
  }
  out += header;
  const std::size_t offset = out.size();
  out.resize(offset + data_bytes);
  char* dst = out.data() + offset;
  if (data_bytes == 0) return out;  // an empty tensor may have no buffer at all
  switch (tensor.dtype()) {
    case DType::f32: std::memcpy(dst, tensor.data<float>(), data_bytes); break;
    case DType::f64: {
      const double* src = tensor.data<double>();
      for (std::size_t i = 0; i < n; ++i) {
        const float v = static_cast<float>(src[i]);
        std::memcpy(dst + 4 * i, &v, 4);
      }
      break;
    }
    case DType::i64: std::memcpy(dst, tensor.data<std::int64_t>(), data_bytes); break;
    case DType::b8: {
      const bool* src = tensor.data<bool>();
      for (std::size_t i = 0; i < n; ++i) dst[i] = src[i] ? 1 : 0;
      break;
    }
  }
  return out;
}

Tensor npy_decode(std::string_view bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen))
    fail(what, "not a .npy array (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  std::size_t prefix = 0, header_len = 0;
  if (major == 1) {
    prefix = 10;
    header_len = read_le<std::uint16_t>(bytes.data() + 8);
  } else if (major == 2) {
    if (bytes.size() < 12) fail(what, ".npy header truncated");
    prefix = 12;
    header_len = read_le<std::uint32_t>(bytes.data() + 8);
  } else {
    fail(what, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (expected 1.0 or 2.0)");
  }
  if (bytes.size() < prefix + header_len) fail(what, ".npy header truncated");
  std::string descr;
  bool fortran = false;
  std::vector<std::int64_t> dims;
  HeaderParser(bytes.substr(prefix, header_len), what).parse(descr, fortran, dims);

  DType dtype;
  if (descr == "<f4") dtype = DType::f32;
  else if (descr == "<f8") dtype = DType::f64;
  else if (descr == "<i8") dtype = DType::i64;
  else if (descr == "|b1") dtype = DType::b8;
  else fail(what, "unsupported dtype '" + elide(descr) + "' (expected '<f4', '<f8', '<i8' or '|b1')");
  if (fortran) fail(what, "fortran_order=True is not supported (save np.ascontiguousarray(a))");
  if (static_cast<int>(dims.size()) > Shape::kMaxDims)
    fail(what, std::to_string(dims.size()) + " dimensions (at most " + std::to_string(Shape::kMaxDims) + ")");
  const Shape shape(dims);
  std::uint64_t numel = 1;
  for (auto d : dims) {
    if (d != 0 && numel > std::numeric_limits<std::uint64_t>::max() / 8 / static_cast<std::uint64_t>(d))
      fail(what, "shape " + shape.str() + " is too large");
    numel *= static_cast<std::uint64_t>(d);
  }
  const std::uint64_t expected = numel * dtype_size(dtype);
  const std::uint64_t actual = bytes.size() - prefix - header_len;
  if (actual != expected)
    fail(what, "data is " + std::to_string(actual) + " bytes but the header (shape " + shape.str() + ", '" +
                   descr + "') says " + std::to_string(expected) + (actual < expected ? " (truncated)" : ""));
  Tensor t = Tensor::empty(shape, dtype);
  if (expected) {
    const char* src = bytes.data() + prefix + header_len;
    switch (dtype) {
      case DType::f32: std::memcpy(t.data<float>(), src, expected); break;
      case DType::f64: std::memcpy(t.data<double>(), src, expected); break;
      case DType::i64: std::memcpy(t.data<std::int64_t>(), src, expected); break;
      case DType::b8: {  // any nonzero byte is true (a bool holding another byte would be undefined)
        bool* dst = t.data<bool>();
        for (std::uint64_t i = 0; i < numel; ++i) dst[i] = src[i] != 0;
        break;
      }
    }
  }
  return t;
}

// ---- .npz -------------------------------------------------------------------------------------

void save_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& entries) {
  const std::string what = "save_npz " + path;
  std::set<std::string> names;
  for (const auto& [name, t] : entries) {
    if (name.empty()) fail(what, "empty entry name");
    if (!names.insert(name).second) fail(what, "duplicate entry '" + elide(name) + "'");
    if (!t.defined()) fail(what, "entry '" + elide(name) + "' is undefined");
    // float64 is stored as float32: a finite value beyond float32's range would come back as inf.
    // Refused here, before anything is written. NaN and inf themselves are stored as they are.
    if (auto bad = float32_overflow(t)) fail(what, "entry '" + elide(name) + "' " + *bad);
  }
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) fail(what, "directory '" + parent.string() + "' does not exist");

  std::vector<std::string> blobs;
  blobs.reserve(entries.size());
  for (const auto& [_, t] : entries) blobs.push_back(npy_encode(t));

  try {
    io::write_file_atomic_with(path, [&](const fs::path& tmp) {
      write_archive(tmp.string(), entries, blobs);
      // load_npz reads at most io::limits::kArchive: a larger archive is not put in place.
      const std::uint64_t bytes = fs::file_size(tmp);
      if (bytes > io::limits::kArchive)
        throw std::runtime_error("the archive would be " + std::to_string(bytes) +
                                 " bytes, above the limit of 64 GiB that load_npz reads");
    });
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
}

namespace {

// Deflate expands at most 1032:1; a stored entry not at all. A larger claim is corrupt or crafted.
constexpr std::uint64_t kMaxDeflateRatio = 1032;
constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{1} << 36;  // 64 GiB: far above any model here
constexpr std::uint64_t kReadChunk = std::uint64_t{16} << 20;

/// Refuses an entry whose claimed size the archive cannot hold, before any buffer is made.
void check_entry_size(const std::string& entry, std::uint64_t size, std::uint64_t comp_size,
                      std::int32_t method, std::uint64_t archive_bytes) {
  const auto claim = [&](const std::string& why) {
    fail(entry, "claims " + std::to_string(size) + " bytes (" + std::to_string(comp_size) +
                    " compressed): " + why);
  };
  if (comp_size > archive_bytes)
    claim("more compressed bytes than the file's " + std::to_string(archive_bytes));
  if (size > kMaxEntryBytes) claim("above the limit of " + std::to_string(kMaxEntryBytes) + " bytes");
  if (method == ZIP_CM_STORE && size != comp_size) claim("a stored entry must be as large as its data");
  if (method != ZIP_CM_STORE && size > comp_size * kMaxDeflateRatio)
    claim("more than compression can expand to");
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> load_npz(const std::string& path) {
  const std::string what = "load_npz " + path;
  // Only a regular file within io::limits::kArchive, checked on the descriptor libzip reads (a
  // FIFO at the path is refused at once instead of blocking the open).
  int fd = -1;
  try {
    fd = io::open_regular_fd(path, io::limits::kArchive);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("load_npz " + std::string(e.what()));  // "load_npz PATH: is a FIFO, ..."
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    fail(what, "cannot stat: " + err);
  }
  const auto archive_bytes = static_cast<std::uint64_t>(st.st_size);
  int code = 0;
  zip_t* za = zip_fdopen(fd, ZIP_CHECKCONS, &code);  // read-only; on success libzip owns fd
  if (!za) {
    ::close(fd);
    fail(what, "cannot open as a zip archive: " + zip_code_message(code));
  }
  struct Closer {
    zip_t* za;
    ~Closer() { zip_discard(za); }  // read-only: nothing to write back
  } closer{za};

  std::vector<std::pair<std::string, Tensor>> out;
  std::set<std::string> seen;
  const zip_int64_t n = zip_get_num_entries(za, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* raw = zip_get_name(za, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_GUESS);
    if (!raw) fail(what, "entry #" + std::to_string(i) + ": " + zip_strerror(za));
    std::string name = raw;
    const std::string entry = what + ": entry '" + name + "'";
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0) fail(entry, "not a .npy file");
    name.resize(name.size() - 4);
    if (!seen.insert(name).second) fail(entry, "duplicate entry");

    zip_stat_t st;
    zip_stat_init(&st);
    constexpr zip_uint64_t kNeeded = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD;
    if (zip_stat_index(za, static_cast<zip_uint64_t>(i), 0, &st) < 0 || (st.valid & kNeeded) != kNeeded)
      fail(entry, std::string("cannot stat: ") + zip_strerror(za));
    check_entry_size(entry, st.size, st.comp_size, st.comp_method, archive_bytes);
    zip_file_t* zf = zip_fopen_index(za, static_cast<zip_uint64_t>(i), 0);
    if (!zf) fail(entry, std::string("cannot open: ") + zip_strerror(za));
    // The buffer grows with the bytes that arrive, so even a size claim that passed the checks above
    // commits no more memory than the data really holds.
    std::string bytes;
    std::uint64_t got = 0;
    std::string error;
    while (got < st.size) {
      const std::uint64_t chunk = std::min<std::uint64_t>(st.size - got, kReadChunk);
      bytes.resize(static_cast<std::size_t>(got + chunk));
      const zip_int64_t r = zip_fread(zf, bytes.data() + got, chunk);
      if (r < 0) {
        error = zip_file_strerror(zf);
        break;
      }
      if (r == 0) break;
      got += static_cast<std::uint64_t>(r);
    }
    bytes.resize(static_cast<std::size_t>(got));
    if (error.empty() && got == st.size) {
      char extra;  // reading past the end makes libzip verify the CRC
      const zip_int64_t r = zip_fread(zf, &extra, 1);
      if (r < 0) error = zip_file_strerror(zf);
      else if (r > 0) error = "more data than the zip directory says";
    }
    zip_fclose(zf);
    if (!error.empty()) fail(entry, "read error: " + error);
    if (got != st.size)
      fail(entry, "data ends after " + std::to_string(got) + " of " + std::to_string(st.size) + " bytes");
    out.emplace_back(std::move(name), npy_decode(bytes, entry));
  }
  return out;
}

std::vector<std::string>& LoadReport::section(const std::string& title) {
  for (auto& [t, items] : sections)
    if (t == title) return items;
  return sections.emplace_back(title, std::vector<std::string>{}).second;
}

void LoadReport::throw_if_any(const std::string& header) const {
  std::string msg, counts, details;
  for (const auto& [title, items] : sections) {
    if (items.empty()) continue;
    msg += (msg.empty() ? " " : "; ") + title + ": [";
    for (std::size_t i = 0; i < items.size(); ++i) msg += (i ? ", " : "") + items[i];
    msg += "]";
    counts += (counts.empty() ? " " : ", ") + std::to_string(items.size()) + " " + title;
    std::string shown;
    for (std::size_t i = 0; i < items.size() && i < 8; ++i) shown += (i ? ", " : "") + elide(items[i], 80);
    if (items.size() > 8) shown += ", ... (" + std::to_string(items.size() - 8) + " more)";
    details += "\n  " + title + ": [" + shown + "]";
  }
  if (msg.empty()) return;
  // Few problems: one line, all of them. Many: the counts first, then a few of each on later lines.
  if (msg.size() <= 160) throw std::runtime_error(header + ":" + msg);
  throw std::runtime_error(header + ":" + counts + details);
}

}  // namespace tg::nn
