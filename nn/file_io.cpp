// Reading and writing the user's files (nn/file_io.h): POSIX descriptors underneath, so that the
// kind of a file is checked on the descriptor that is read (fstat), a FIFO cannot block the open
// (O_NONBLOCK), and every error of read, write, fsync, close and rename is seen.
#include "nn/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <stdexcept>
#include <streambuf>
#include <system_error>
#include <vector>

namespace tg::nn::io {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int err) { return std::strerror(err); }

/// "PATH" or "PATH (what)": the start of every message about `path`.
std::string subject(const fs::path& path, std::string_view what) {
  std::string s = path.string();
  if (!what.empty()) s.append(" (").append(what).append(")");
  return s;
}

[[noreturn]] void fail(const fs::path& path, std::string_view what, const std::string& why) {
  throw std::runtime_error(subject(path, what) + ": " + why);
}

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// "16 MiB" for a whole number of MiB or GiB, else the byte count.
std::string size_text(std::uint64_t bytes) {
  if (bytes >= (std::uint64_t{1} << 30) && bytes % (std::uint64_t{1} << 30) == 0)
    return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (std::uint64_t{1} << 20) && bytes % (std::uint64_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

[[noreturn]] void too_large(const fs::path& path, std::string_view what, std::uint64_t size, std::uint64_t max_bytes) {
  fail(path, what,
       "is " + std::to_string(size) + " bytes, above the limit of " + size_text(max_bytes) +
           " for this kind of file (refused before reading it)");
}

/// A descriptor closed on destruction (errors of that close are of no interest: reads only).
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    const int f = fd;
    fd = -1;
    return f;
  }
};

/// Opens a regular file for reading: refuses other kinds by path (stat, so no device is ever
/// opened) and again on the descriptor (fstat: the file checked is the file read), and refuses a
/// size above `max_bytes`. O_NONBLOCK makes the open of a FIFO put there between the two checks
/// return at once instead of waiting for a writer; a regular file ignores the flag.
Fd open_regular(const fs::path& path, std::uint64_t max_bytes, std::string_view what, std::uint64_t& size) {
  require_regular_file(path, what);
  int fd;
  do fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) fail(path, what, "cannot open (" + errno_text(errno) + ")");
  Fd owned(fd);
  struct stat st{};
  if (::fstat(fd, &st) != 0) fail(path, what, "cannot stat (" + errno_text(errno) + ")");
  if (!S_ISREG(st.st_mode)) fail(path, what, "is " + kind_of(st.st_mode) + ", not a regular file");
  size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) too_large(path, what, size, max_bytes);
  return owned;
}

/// read(2) with EINTR retried; -1 with errno on an error.
ssize_t read_some(int fd, char* buf, std::size_t n) {
  ssize_t r;
  do r = ::read(fd, buf, n);
  while (r < 0 && errno == EINTR);
  return r;
}

/// Stream buffer over a descriptor it owns. A read error, or more bytes than `max_bytes` (a file
/// growing while it is read), throws from underflow: std::istream turns that into badbit, and the
/// text is kept for LineReader's message.
class FdStreambuf : public std::streambuf {
 public:
  FdStreambuf(Fd fd, std::uint64_t max_bytes) : fd_(std::move(fd)), max_bytes_(max_bytes), buf_(1 << 16) {}
  const std::string& error() const { return error_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (!error_.empty()) throw std::runtime_error(error_);
    const ssize_t r = read_some(fd_.fd, buf_.data(), buf_.size());
    if (r < 0) {
      error_ = "read error (" + errno_text(errno) + ")";
      throw std::runtime_error(error_);
    }
    if (r == 0) return traits_type::eof();
    total_ += static_cast<std::uint64_t>(r);
    if (total_ > max_bytes_) {
      error_ = "grew above the limit of " + size_text(max_bytes_) + " while being read";
      throw std::runtime_error(error_);
    }
    setg(buf_.data(), buf_.data(), buf_.data() + r);
    return traits_type::to_int_type(*gptr());
  }

 private:
  Fd fd_;
  std::uint64_t max_bytes_;
  std::uint64_t total_ = 0;
  std::vector<char> buf_;
  std::string error_;
};

/// The stream open_input returns: its buffer's error text is what LineReader reports on badbit.
class FdInputStream : public std::istream {
 public:
  FdInputStream(Fd fd, std::uint64_t max_bytes) : std::istream(nullptr), buf_(std::move(fd), max_bytes) {
    rdbuf(&buf_);
  }
  const std::string& error() const { return buf_.error(); }

 private:
  FdStreambuf buf_;
};

std::string random_suffix() {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device rd;
  std::string s;
  for (int i = 0; i < 6; ++i) s += kChars[rd() % (sizeof(kChars) - 1)];
  return s;
}

/// Creates `base.tmp-XXXXXX` exclusively (mode 0666 less the umask, as a plain create), returning
/// its descriptor and name; throws naming `subject_path` when no name can be created.
int create_temporary(const fs::path& base, const fs::path& subject_path, fs::path& name) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    name = base.string() + ".tmp-" + random_suffix();
    int fd;
    do fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    while (fd < 0 && errno == EINTR);
    if (fd >= 0) return fd;
    if (errno != EEXIST)
      fail(subject_path, {}, "cannot create the temporary file " + name.string() + " (" + errno_text(errno) + ")");
  }
  fail(subject_path, {}, "cannot create a temporary file beside it (100 names taken)");
}

void write_all(int fd, std::string_view bytes, const fs::path& path, const fs::path& shown) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(path, {}, "write error on " + shown.string() + " (" + errno_text(errno) + ")");
    }
    done += static_cast<std::size_t>(w);
  }
}

/// fsync of the directory holding `path`, after a rename into it: the new entry is on disk once
/// this returns. A directory that cannot be opened for reading (mode -wx) cannot be synced and
/// is skipped; a failed fsync is an error.
void sync_directory_of(const fs::path& path) {
  fs::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0)
    fail(path, {}, "written and renamed into place, but syncing its directory failed (" + errno_text(err) + ")");
}

/// The file a write to `path` replaces: `path` itself, or the file a symbolic link there points to
/// (the link is kept, as a write through it would).
fs::path write_target(const fs::path& path) {
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(path, ec))) {
    const fs::path real = fs::weakly_canonical(path, ec);
    if (!ec) return real;
  }
  return path;
}

/// Lexical containment of normalised absolute paths: `inner` lies strictly below `outer`.
bool strictly_inside(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin(), o = outer.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  for (; i != inner.end(); ++i)
    if (!i->empty()) return true;
  return false;
}

/// The absolute, normalised form of `p` with the symbolic links of its existing part resolved.
fs::path comparable(const fs::path& p) {
  std::error_code ec;
  fs::path out = fs::weakly_canonical(fs::absolute(p, ec), ec);
  if (ec) out = fs::absolute(p).lexically_normal();
  // "dir/" and "dir" name the same directory.
  if (!out.has_filename() && out.has_parent_path() && out != out.root_path()) out = out.parent_path();
  return out;
}

}  // namespace

void require_regular_file(const fs::path& path, std::string_view what) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) fail(path, what, "cannot open (" + errno_text(errno) + ")");
  if (!S_ISREG(st.st_mode)) fail(path, what, "is " + kind_of(st.st_mode) + ", not a regular file");
}

std::string read_file(const fs::path& path, std::uint64_t max_bytes, std::string_view what) {
  std::uint64_t size = 0;
  Fd fd = open_regular(path, max_bytes, what, size);
  std::string out;
  out.resize(static_cast<std::size_t>(size));
  std::size_t got = 0;
  // Reads until read(2) says the end: a file that shrank is shorter, one that grew is read on as
  // long as it stays within max_bytes (files in /proc report size 0 and still have content).
  while (true) {
    if (got == out.size()) {
      if (got >= max_bytes) {
        char probe;
        const ssize_t r = read_some(fd.fd, &probe, 1);
        if (r < 0) fail(path, what, "read error (" + errno_text(errno) + ")");
        if (r == 0) break;
        fail(path, what, "grew above the limit of " + size_text(max_bytes) + " while being read");
      }
      const std::uint64_t grown = std::min<std::uint64_t>(max_bytes, std::max<std::uint64_t>(got * 2, 1 << 16));
      out.resize(static_cast<std::size_t>(grown));
    }
    const ssize_t r = read_some(fd.fd, out.data() + got, out.size() - got);
    if (r < 0) fail(path, what, "read error (" + errno_text(errno) + ")");
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  out.resize(got);
  return out;
}

void read_chunks(const fs::path& path, std::uint64_t max_bytes,
                 const std::function<void(const char* data, std::size_t size)>& consume, std::string_view what) {
  std::uint64_t size = 0;
  Fd fd = open_regular(path, max_bytes, what, size);
  std::vector<char> buf(std::size_t{1} << 20);
  std::uint64_t total = 0;
  while (true) {
    const ssize_t r = read_some(fd.fd, buf.data(), buf.size());
    if (r < 0) fail(path, what, "read error (" + errno_text(errno) + ")");
    if (r == 0) break;
    total += static_cast<std::uint64_t>(r);
    if (total > max_bytes) fail(path, what, "grew above the limit of " + size_text(max_bytes) + " while being read");
    consume(buf.data(), static_cast<std::size_t>(r));
  }
}

int open_regular_fd(const fs::path& path, std::uint64_t max_bytes, std::string_view what) {
  std::uint64_t size = 0;
  return open_regular(path, max_bytes, what, size).release();
}

std::unique_ptr<std::istream> open_input(const fs::path& path, std::uint64_t max_bytes, std::string_view what) {
  std::uint64_t size = 0;
  return std::make_unique<FdInputStream>(open_regular(path, max_bytes, what, size), max_bytes);
}

LineReader::LineReader(std::istream& in, std::string source, std::size_t max_line)
    : in_(in), source_(std::move(source)), max_line_(max_line) {}

bool LineReader::next(std::string& line) {
  line.clear();
  auto failure = [&](const std::string& why) {
    throw std::runtime_error(source_ + ":" + std::to_string(line_number_ + 1) + ": " + why);
  };
  auto read_error = [&] {
    const auto* own = dynamic_cast<const FdInputStream*>(&in_);
    failure(own && !own->error().empty() ? own->error() : std::string("read error"));
  };
  if (in_.bad()) read_error();
  if (!in_.good()) return false;  // the end was reached by an earlier call
  // istream::getline into a fixed buffer: at most kChunk - 1 bytes a call, so a line is never
  // held beyond max_line + kChunk bytes, however long it is in the file.
  constexpr std::size_t kChunk = 1 << 16;
  char buf[kChunk];
  bool any = false;
  while (true) {
    in_.getline(buf, kChunk);
    const std::streamsize n = in_.gcount();
    if (in_.bad()) read_error();
    const bool at_end = in_.eof();
    const bool filled = !at_end && in_.fail();  // kChunk - 1 bytes stored, no '\n' yet
    // Neither: the '\n' was extracted (counted in gcount, not stored).
    const std::size_t stored = static_cast<std::size_t>(n) - (at_end || filled ? 0 : 1);
    line.append(buf, stored);
    if (line.size() > max_line_)
      failure("line longer than the limit of " + std::to_string(max_line_) + " bytes");
    any = any || n > 0;
    if (at_end) {
      if (!any) return false;
      ++line_number_;
      return true;
    }
    if (filled) {
      in_.clear(in_.rdstate() & ~std::ios::failbit);
      continue;
    }
    ++line_number_;
    return true;
  }
}

std::vector<std::string> read_lines(const fs::path& path, std::uint64_t max_bytes, std::string_view what,
                                    std::size_t max_line) {
  const auto in = open_input(path, max_bytes, what);
  LineReader reader(*in, subject(path, what), max_line);
  std::vector<std::string> lines;
  for (std::string line; reader.next(line);) lines.push_back(std::move(line));
  return lines;
}

namespace {

/// Replaces the regular file (or nothing) at `path` by what `write` puts into a fresh temporary
/// beside it: `write` gets the temporary's descriptor and name. With `by_name` the writer writes
/// through the name (a library that makes its own file there, as libzip does), so the file is
/// reopened to be fsynced; otherwise the descriptor is fsynced. Then close (checked), rename over
/// `path`, fsync of the directory. On any failure before the rename the temporary is removed and
/// `path` is as it was.
void replace_atomically(const fs::path& path_arg, const std::function<void(int fd, const fs::path& temporary)>& write,
                        bool by_name) {
  const fs::path path = write_target(path_arg);
  struct stat st{};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  fs::path temporary;
  const int fd = create_temporary(path, path_arg, temporary);
  bool open = true;
  try {
    // An existing file keeps its permission bits (a new one gets 0666 less the umask).
    if (exists && ::fchmod(fd, st.st_mode & 07777) != 0)
      fail(path_arg, {}, "cannot set the mode of " + temporary.string() + " (" + errno_text(errno) + ")");
    write(fd, temporary);
    if (!by_name && ::fsync(fd) != 0)
      fail(path_arg, {}, "fsync of " + temporary.string() + " failed (" + errno_text(errno) + ")");
    open = false;
    if (::close(fd) != 0)
      fail(path_arg, {}, "write error at the close of " + temporary.string() + " (" + errno_text(errno) + ")");
    if (by_name) {
      const int again = ::open(temporary.c_str(), O_RDONLY | O_CLOEXEC);
      if (again < 0) fail(path_arg, {}, "cannot reopen " + temporary.string() + " to sync it (" + errno_text(errno) + ")");
      const int rc = ::fsync(again);
      const int err = errno;
      ::close(again);
      if (rc != 0) fail(path_arg, {}, "fsync of " + temporary.string() + " failed (" + errno_text(err) + ")");
    }
    if (::rename(temporary.c_str(), path.c_str()) != 0)
      fail(path_arg, {}, "cannot rename " + temporary.string() + " over it (" + errno_text(errno) + ")");
  } catch (...) {
    if (open) ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  sync_directory_of(path);
}

/// The kind of what stands at `path` (following links): 0 if nothing does.
mode_t existing_kind(const fs::path& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

}  // namespace

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  const mode_t kind = existing_kind(path);
  if (kind == S_IFDIR) fail(path, {}, "is a directory, cannot write a file there");
  if (kind != 0 && kind != S_IFREG) {
    // A FIFO or a device (/dev/null, /dev/stdout): nothing to replace, the bytes go into it.
    // Opened without blocking, so a FIFO that no process reads is an error, not a hang.
    int fd;
    do fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
      fail(path, {}, errno == ENXIO ? "cannot open for writing (a FIFO that no process reads)"
                                    : "cannot open for writing (" + errno_text(errno) + ")");
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    try {
      write_all(fd, bytes, path, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (::close(fd) != 0) fail(path, {}, "write error at close (" + errno_text(errno) + ")");
    return;
  }
  replace_atomically(path, [&](int fd, const fs::path& temporary) { write_all(fd, bytes, path, temporary); }, false);
}

void write_file_atomic_with(const fs::path& path, const std::function<void(const fs::path& temporary)>& write) {
  const mode_t kind = existing_kind(path);
  if (kind == S_IFDIR) fail(path, {}, "is a directory, cannot write a file there");
  if (kind != 0 && kind != S_IFREG) fail(path, {}, "is " + kind_of(kind) + ", not a regular file to replace");
  replace_atomically(path, [&](int, const fs::path& temporary) { write(temporary); }, true);
}

void require_writable_location(const fs::path& path) {
  std::error_code ec;
  const fs::path target = write_target(path);
  const auto st = fs::status(target, ec);
  if (fs::is_directory(st)) fail(path, {}, "is a directory, cannot write a file there");
  // The nearest directory that exists on the way to `path`, and the first name below it that
  // does not (the directory to create, or the file itself).
  fs::path below = fs::absolute(target, ec).lexically_normal();
  if (!below.has_filename()) below = below.parent_path();
  fs::path dir = below.parent_path();
  while (!fs::exists(dir, ec) && dir.has_relative_path()) {
    below = dir;
    dir = dir.parent_path();
  }
  if (!fs::is_directory(dir, ec)) fail(path, {}, "cannot be created: " + dir.string() + " is not a directory");
  // The probe is the temporary a write there would make: created and removed, nothing is left.
  fs::path probe;
  const int fd = create_temporary(below, path, probe);
  ::close(fd);
  if (::unlink(probe.c_str()) != 0)
    fail(path, {}, "cannot remove the probe file " + probe.string() + " (" + errno_text(errno) + ")");
}

void require_distinct_outputs(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs) {
  auto clash = [](const NamedPath& out, const NamedPath& other) {
    throw std::runtime_error(out.name + " (" + out.path.string() + ") would overwrite " + other.name + " (" +
                             other.path.string() + ")");
  };
  auto same_file = [](const fs::path& a, const fs::path& b) {
    std::error_code ec;
    return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec) && !ec;
  };
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    const NamedPath& out = outputs[o];
    if (out.path.empty()) continue;
    const fs::path out_key = comparable(out.path);
    for (const NamedPath& in : inputs) {
      if (in.path.empty()) continue;
      const fs::path in_key = comparable(in.path);
      if (same_file(out.path, in.path) || out_key == in_key || strictly_inside(out_key, in_key) ||
          strictly_inside(in_key, out_key))
        clash(out, in);
    }
    // Two outputs that are one file: the second would overwrite the first.
    for (std::size_t k = 0; k < o; ++k) {
      const NamedPath& earlier = outputs[k];
      if (earlier.path.empty()) continue;
      if (same_file(out.path, earlier.path) || out_key == comparable(earlier.path)) clash(out, earlier);
    }
  }
}

void flush_stdout_or_throw() {
  errno = 0;
  std::cout.flush();
  const int cout_errno = errno;
  errno = 0;
  const int rc = std::fflush(stdout);
  const int err = rc != 0 ? errno : cout_errno;
  if (rc != 0 || std::cout.fail() || std::ferror(stdout)) {
    throw std::runtime_error("stdout: write error (" +
                             (err != 0 ? errno_text(err) : std::string("an earlier write to standard output failed")) +
                             ")");
  }
}

}  // namespace tg::nn::io
