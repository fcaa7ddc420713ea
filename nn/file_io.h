#pragma once
// Reading and writing the user's files without losing data or hanging: only regular files are
// read as data, every read has a size limit checked before memory is committed and a length
// limit per line, every read and write error is an error, and outputs replace their file
// atomically. Every function throws std::runtime_error whose first line names the file (and the
// line, for line errors). The limits are listed in docs/reliability.md.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <istream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tg::nn::io {

/// Size limits of the files tapegrad reads (bytes), each far above real data and far below the
/// machine's memory; the reason for each is in docs/reliability.md.
namespace limits {
inline constexpr std::uint64_t kSmallJson = std::uint64_t{16} << 20;      ///< manifest/config/training.json
inline constexpr std::uint64_t kVocabulary = std::uint64_t{64} << 20;     ///< a vocabulary file (200,000+ lines)
inline constexpr std::uint64_t kTokenizerModel = std::uint64_t{64} << 20; ///< a SentencePiece model
inline constexpr std::uint64_t kTextData = std::uint64_t{4} << 30;        ///< a corpus, hypotheses, references, logs
inline constexpr std::uint64_t kArchive = std::uint64_t{64} << 30;        ///< an .npz archive
inline constexpr std::size_t kLineBytes = std::size_t{1} << 20;           ///< one line of any text file
}  // namespace limits

/// Throws unless `path` names a regular file (after following symbolic links): a FIFO, device,
/// socket or directory is refused with its path and kind named ("PATH: is a FIFO, not a regular
/// file"). `what` is an optional label put after the path ("PATH (vocabulary): ...").
void require_regular_file(const std::filesystem::path& path, std::string_view what = {});

/// The whole content of the regular file `path`. Opened with O_NONBLOCK (a FIFO put there after
/// the check cannot block) and checked with fstat on the open descriptor; its size is compared
/// with `max_bytes` before anything is allocated; a read error is an error, never a short file.
std::string read_file(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what = {});

/// Opens the regular file `path` for streaming reads (a corpus, a log): the same checks as
/// read_file without reading it whole. The stream reads the checked descriptor itself (a
/// std::streambuf over it, no reopening by name); a read error sets badbit (LineReader reports
/// the system's reason), and so do more than `max_bytes` bytes (a file growing while it is read).
std::unique_ptr<std::istream> open_input(const std::filesystem::path& path, std::uint64_t max_bytes,
                                         std::string_view what = {});

/// The regular file `path`, read in chunks of at most 1 MiB passed to `consume` (for a digest of
/// a file without holding it): read_file's checks and errors, without the whole content in memory.
void read_chunks(const std::filesystem::path& path, std::uint64_t max_bytes,
                 const std::function<void(const char* data, std::size_t size)>& consume, std::string_view what = {});

/// A read-only descriptor (O_CLOEXEC) of the regular file `path`, after read_file's checks (kind
/// by path and on the descriptor, size against `max_bytes`), for a library that reads from a
/// descriptor (libzip's zip_fdopen). The caller owns it.
int open_regular_fd(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what = {});

/// Reads lines from a stream (without the '\n'; a final line without one is still a line): a
/// line longer than `max_line` bytes and a read error (badbit) are errors naming `source` and
/// the line number, so neither is ever taken for the end of the input.
class LineReader {
 public:
  LineReader(std::istream& in, std::string source, std::size_t max_line = limits::kLineBytes);
  /// The next line into `line`; false at the end of the input.
  bool next(std::string& line);
  /// The number of the line last returned (1-based; 0 before the first).
  std::size_t line_number() const { return line_number_; }
  const std::string& source() const { return source_; }

 private:
  std::istream& in_;
  std::string source_;
  std::size_t max_line_;
  std::size_t line_number_ = 0;
};

/// Every line of the regular file `path` (read_file's checks, then LineReader's).
std::vector<std::string> read_lines(const std::filesystem::path& path, std::uint64_t max_bytes,
                                    std::string_view what = {}, std::size_t max_line = limits::kLineBytes);

/// Writes `bytes` to `path` atomically: into `path.tmp-XXXXXX` beside it (created exclusively),
/// flushed, fsynced, closed and renamed over `path`, then the directory fsynced. Every write,
/// fsync, close and rename is checked. A failure up to the rename leaves `path` as it was and
/// removes the temporary; a failed fsync of the directory after the rename is reported too (the
/// file then holds the new bytes, not known to be on disk). An existing file keeps its permission
/// bits; a symbolic link at `path` is followed (the file it names is replaced, the link stays).
/// `path` being a directory is refused. A FIFO or device already at `path` (/dev/null,
/// /dev/stdout) cannot be replaced: the bytes are written into it, opened without blocking (a
/// FIFO no process reads is an error, not a hang).
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

/// write_file_atomic for a writer that writes by name (libzip writes its archive itself):
/// `write` gets the temporary's path (an empty file just created) and must leave the complete
/// content there; then fsync, rename and directory fsync as above, the temporary removed on
/// failure. `path` must not exist or be a regular file (a FIFO or device there is refused).
void write_file_atomic_with(const std::filesystem::path& path,
                            const std::function<void(const std::filesystem::path& temporary)>& write);

/// Throws unless a file could be created in the directory that would hold `path`: the nearest
/// existing directory on the way to `path` is found (a regular file there is refused), and a
/// probe file named as write_file_atomic's temporary (`NAME.tmp-XXXXXX`, NAME the first missing
/// component) is created in it and removed. No directory is created, nothing is left behind:
/// when the parent is missing the probe shows that it could be made. `path` being a directory is
/// refused. Called before long work so an unwritable output is found before it, not after.
void require_writable_location(const std::filesystem::path& path);

/// Output paths must not equal or alias any input: same file (same device and inode, through
/// links or other spellings), an output inside an input directory, or an input inside an output
/// directory. Two outputs naming the same file clash too (the later would overwrite the earlier).
/// Throws "NAME_OUT (PATH) would overwrite NAME_IN (PATH)" for the first clash. Paths are compared
/// by their absolute, normalised form with the symbolic links of their existing part resolved
/// (std::filesystem::weakly_canonical), and by device and inode when both exist.
struct NamedPath {
  std::string name;             ///< the flag or role, e.g. "--log-csv"
  std::filesystem::path path;   ///< empty = not given (skipped)
};
void require_distinct_outputs(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs);

/// Flushes stdout (both the C++ stream and C stdio) and throws if any write to it failed (a full
/// disk, a closed pipe, /dev/full): called before a program exits with status 0.
void flush_stdout_or_throw();

}  // namespace tg::nn::io
