// nn/file_io.h: only regular files read, sizes and lines bounded, read errors seen, writes atomic,
// outputs never aliasing inputs.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../autograd/error_of.h"
#include "deadline.h"
#include "nn/file_io.h"

namespace {

namespace fs = std::filesystem;
namespace io = tg::nn::io;
using tg::testing::error_of;
using tg::testing::error_within;

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("tg_file_io_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  std::string put(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  /// The names in the test directory (to see that no temporary is left).
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path dir_;
};

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::vector<std::string> lines_of(const std::string& text, std::size_t max_line = io::limits::kLineBytes) {
  std::istringstream in(text);
  io::LineReader reader(in, "text", max_line);
  std::vector<std::string> out;
  for (std::string line; reader.next(line);) out.push_back(line);
  return out;
}

TEST_F(FileIo, ReadsARegularFileWhole) {
  const std::string bytes("a\0b\nc", 5);
  const std::string p = put("f.bin", bytes);
  EXPECT_EQ(io::read_file(p, 100), bytes);
  EXPECT_EQ(io::read_file(p, 5), bytes);  // the limit itself is allowed
  EXPECT_EQ(io::read_lines(p, 100), (std::vector<std::string>{std::string("a\0b", 3), "c"}));
  std::string chunks;
  io::read_chunks(p, 100, [&](const char* d, std::size_t n) { chunks.append(d, n); });
  EXPECT_EQ(chunks, bytes);
  // Files of /proc report size 0 and still have content: read to the end, not to st_size.
  EXPECT_NE(io::read_file("/proc/self/status", 1 << 20).find("Pid:"), std::string::npos);
}

TEST_F(FileIo, AFifoIsRefusedAtOnceNamingItsPathAndKind) {
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string expected = fifo + " (vocabulary): is a FIFO, not a regular file";
  auto unblock = [&] { tg::testing::unblock_fifo_reader(fifo); };
  EXPECT_EQ(error_within(10, "read_file", [&] { io::read_file(fifo, 100, "vocabulary"); }, unblock), expected);
  EXPECT_EQ(error_within(10, "open_input", [&] { io::open_input(fifo, 100, "vocabulary"); }, unblock), expected);
  EXPECT_EQ(error_within(10, "read_lines", [&] { io::read_lines(fifo, 100, "vocabulary"); }, unblock), expected);
  EXPECT_EQ(error_within(10, "read_chunks", [&] { io::read_chunks(fifo, 100, [](const char*, std::size_t) {}, "vocabulary"); },
                         unblock),
            expected);
  EXPECT_EQ(error_of([&] { io::require_regular_file(fifo); }), fifo + ": is a FIFO, not a regular file");
}

TEST_F(FileIo, DirectoriesDevicesAndMissingFilesAreRefusedNamingThePath) {
  const std::string d = dir_.string();
  EXPECT_EQ(error_of([&] { io::read_file(d, 100); }), d + ": is a directory, not a regular file");
  EXPECT_EQ(error_of([&] { io::open_input(d, 100, "corpus"); }), d + " (corpus): is a directory, not a regular file");
  EXPECT_EQ(error_of([&] { io::read_file("/dev/null", 100); }), "/dev/null: is a character device, not a regular file");
  const std::string missing = (dir_ / "none.txt").string();
  EXPECT_EQ(error_of([&] { io::read_file(missing, 100); }), missing + ": cannot open (No such file or directory)");
}

TEST_F(FileIo, AFileAboveItsLimitIsRefusedBeforeItIsRead) {
  // Sparse: 1 GiB of size, no block on disk and nothing read.
  const std::string p = (dir_ / "config.json").string();
  { std::ofstream(p) << "{}"; }
  fs::resize_file(p, std::uint64_t{1} << 30);
  const std::string expected = p + " (config.json): is 1073741824 bytes, above the limit of 16 MiB for this kind of " +
                               "file (refused before reading it)";
  EXPECT_EQ(error_of([&] { io::read_file(p, io::limits::kSmallJson, "config.json"); }), expected);
  EXPECT_EQ(error_of([&] { io::open_input(p, io::limits::kSmallJson, "config.json"); }), expected);
  EXPECT_EQ(error_of([&] { io::read_chunks(p, io::limits::kSmallJson, [](const char*, std::size_t) {}, "config.json"); }),
            expected);
  EXPECT_EQ(error_of([&] { io::read_file(p, (std::uint64_t{1} << 30) - 1); }),
            p + ": is 1073741824 bytes, above the limit of 1073741823 bytes for this kind of file (refused before reading it)");
}

TEST_F(FileIo, AReadErrorIsAnErrorNotTheEndOfTheFile) {
  // /proc/self/mem is a regular file whose read at offset 0 (an unmapped address) fails with EIO:
  // a reader that took the error for the end would see an empty file.
  EXPECT_EQ(error_of([&] { io::read_file("/proc/self/mem", 1 << 20); }),
            "/proc/self/mem: read error (Input/output error)");
  EXPECT_EQ(error_of([&] { io::read_lines("/proc/self/mem", 1 << 20, "corpus"); }),
            "/proc/self/mem (corpus):1: read error (Input/output error)");
  EXPECT_EQ(error_of([&] { io::read_chunks("/proc/self/mem", 1 << 20, [](const char*, std::size_t) {}); }),
            "/proc/self/mem: read error (Input/output error)");
}

/// A stream buffer whose reads fail after `good` bytes, as a disk error in the middle of a file.
class FailingBuf : public std::streambuf {
 public:
  FailingBuf(std::string data, std::size_t good) : data_(std::move(data)), good_(good) {}

 protected:
  int_type underflow() override {
    if (pos_ >= good_) throw std::runtime_error("EIO");
    const std::size_t n = std::min<std::size_t>(4, good_ - pos_);
    chunk_ = data_.substr(pos_, n);
    pos_ += n;
    setg(chunk_.data(), chunk_.data(), chunk_.data() + chunk_.size());
    return traits_type::to_int_type(chunk_[0]);
  }

 private:
  std::string data_, chunk_;
  std::size_t good_, pos_ = 0;
};

TEST_F(FileIo, LineReaderReportsAReadErrorMidwayNamingTheLine) {
  FailingBuf buf("one\ntwo\nthree\nfour\n", 10);  // fails inside "three"
  std::istream in(&buf);
  io::LineReader reader(in, "corpus.tsv");
  std::string line;
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "one");
  ASSERT_TRUE(reader.next(line));
  EXPECT_EQ(line, "two");
  EXPECT_EQ(error_of([&] { reader.next(line); }), "corpus.tsv:3: read error");
  EXPECT_EQ(error_of([&] { reader.next(line); }), "corpus.tsv:3: read error");  // and stays an error
}

TEST_F(FileIo, LineReaderSplitsAsGetlineDoes) {
  EXPECT_EQ(lines_of(""), std::vector<std::string>{});
  EXPECT_EQ(lines_of("\n"), std::vector<std::string>{""});
  EXPECT_EQ(lines_of("a"), std::vector<std::string>{"a"});
  EXPECT_EQ(lines_of("a\nb"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(lines_of("a\n\nb\n"), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(lines_of("a\r\n"), std::vector<std::string>{"a\r"});  // '\r' is the caller's business
  // Around the reader's 64 KiB chunk: a line of exactly 65,535 / 65,536 bytes, and a long one.
  for (std::size_t n : {65534u, 65535u, 65536u, 65537u, 200000u}) {
    const std::string l(n, 'x');
    EXPECT_EQ(lines_of(l + "\n" + "y\n"), (std::vector<std::string>{l, "y"})) << n;
    EXPECT_EQ(lines_of(l), std::vector<std::string>{l}) << n;
  }
}

TEST_F(FileIo, ALineOverTheLimitIsRefusedNamingFileAndLine) {
  EXPECT_EQ(lines_of("abc\nabcd\n", 4), (std::vector<std::string>{"abc", "abcd"}));
  EXPECT_EQ(error_of([&] { lines_of("abc\nabcd\nabcde\n", 4); }), "text:3: line longer than the limit of 4 bytes");
  const std::string p = put("v.txt", "<unk>\n" + std::string(100, 'x') + "\n");
  EXPECT_EQ(error_of([&] { io::read_lines(p, 1000, "vocabulary", 64); }),
            p + " (vocabulary):2: line longer than the limit of 64 bytes");
  // A 64 MiB line without a newline (a sparse file of zeros) is refused at the limit, not read whole.
  const std::string big = (dir_ / "big.txt").string();
  { std::ofstream(big) << "x"; }
  fs::resize_file(big, std::uint64_t{64} << 20);
  EXPECT_EQ(error_of([&] { io::read_lines(big, io::limits::kTextData); }),
            big + ":1: line longer than the limit of 1048576 bytes");
}

TEST_F(FileIo, WriteFileAtomicReplacesTheFileKeepingItsMode) {
  const fs::path p = dir_ / "out.txt";
  io::write_file_atomic(p, "first");
  EXPECT_EQ(slurp(p), "first");
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(fs::status(p).permissions() & fs::perms::all, fs::perms(0666 & ~mask));  // as a plain create
  fs::permissions(p, fs::perms(0600));
  io::write_file_atomic(p, "second, longer");
  EXPECT_EQ(slurp(p), "second, longer");
  EXPECT_EQ(fs::status(p).permissions() & fs::perms::all, fs::perms(0600));
  EXPECT_EQ(names(), std::vector<std::string>{"out.txt"});
  // Through a symbolic link: the file it names is replaced, the link stays.
  fs::create_symlink(p, dir_ / "link.txt");
  io::write_file_atomic(dir_ / "link.txt", "third");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.txt"));
  EXPECT_EQ(slurp(p), "third");
  // By name (a library writing the file itself).
  io::write_file_atomic_with(p, [](const fs::path& tmp) { std::ofstream(tmp, std::ios::binary) << "fourth"; });
  EXPECT_EQ(slurp(p), "fourth");
  EXPECT_EQ(names(), (std::vector<std::string>{"link.txt", "out.txt"}));
}

TEST_F(FileIo, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  const fs::path p = dir_ / "vocab.txt";
  io::write_file_atomic(p, "old content\n");
  // A real write error: the file-size limit makes write(2) fail with EFBIG past 4 KiB.
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string error = error_of([&] { io::write_file_atomic(p, std::string(10000, 'x')); });
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(starts_with(error, p.string() + ": write error on " + p.string() + ".tmp-")) << error;
  EXPECT_NE(error.find("(File too large)"), std::string::npos) << error;
  EXPECT_EQ(slurp(p), "old content\n");
  EXPECT_EQ(names(), std::vector<std::string>{"vocab.txt"});
  // A writer by name that throws: the same.
  EXPECT_EQ(error_of([&] {
              io::write_file_atomic_with(p, [](const fs::path&) { throw std::runtime_error("zip failed"); });
            }),
            "zip failed");
  EXPECT_EQ(slurp(p), "old content\n");
  EXPECT_EQ(names(), std::vector<std::string>{"vocab.txt"});
}

TEST_F(FileIo, WriteFileAtomicRefusesWhatItCannotReplace) {
  const std::string file = put("file", "x");
  const std::string under = file + "/out.txt";
  const std::string e = error_of([&] { io::write_file_atomic(under, "y"); });
  EXPECT_TRUE(starts_with(e, under + ": cannot create the temporary file " + under + ".tmp-")) << e;
  EXPECT_NE(e.find("(Not a directory)"), std::string::npos) << e;
  EXPECT_EQ(error_of([&] { io::write_file_atomic(dir_, "y"); }),
            dir_.string() + ": is a directory, cannot write a file there");
  EXPECT_EQ(error_of([&] { io::write_file_atomic_with("/dev/null", [](const fs::path&) {}); }),
            "/dev/null: is a character device, not a regular file to replace");
  EXPECT_EQ(slurp(file), "x");
}

TEST_F(FileIo, WriteFileAtomicWritesIntoDevicesAndNeverBlocksOnAFifo) {
  io::write_file_atomic("/dev/null", "discarded");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_EQ(error_of([&] { io::write_file_atomic("/dev/full", "x"); }),
            "/dev/full: write error on /dev/full (No space left on device)");
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_within(
                10, "write to a FIFO", [&] { io::write_file_atomic(fifo, "x"); },
                [&] {
                  const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
                  if (fd >= 0) ::close(fd);
                }),
            fifo + ": cannot open for writing (a FIFO that no process reads)");
}

TEST_F(FileIo, RequireWritableLocationProbesWithoutLeavingAnything) {
  io::require_writable_location(dir_ / "out.txt");
  io::require_writable_location(dir_ / "a" / "b" / "out.txt");  // parents that can be made
  put("existing.txt", "keep");
  io::require_writable_location(dir_ / "existing.txt");
  EXPECT_EQ(names(), std::vector<std::string>{"existing.txt"});  // no probe, no directory left
  EXPECT_EQ(slurp(dir_ / "existing.txt"), "keep");
  const std::string file = (dir_ / "existing.txt").string();
  EXPECT_EQ(error_of([&] { io::require_writable_location(file + "/sub/out.txt"); }),
            file + "/sub/out.txt: cannot be created: " + file + " is not a directory");
  EXPECT_EQ(error_of([&] { io::require_writable_location(dir_); }),
            dir_.string() + ": is a directory, cannot write a file there");
  // /proc refuses new files even to root.
  const std::string e = error_of([&] { io::require_writable_location("/proc/tg-no-such-dir/out.txt"); });
  EXPECT_TRUE(starts_with(e, "/proc/tg-no-such-dir/out.txt: cannot create the temporary file /proc/tg-no-such-dir.tmp-"))
      << e;
  if (::geteuid() != 0) {  // root ignores a directory's permissions
    fs::create_directory(dir_ / "ro");
    fs::permissions(dir_ / "ro", fs::perms(0500));
    const std::string r = error_of([&] { io::require_writable_location(dir_ / "ro" / "out.txt"); });
    EXPECT_NE(r.find("(Permission denied)"), std::string::npos) << r;
  }
}

TEST_F(FileIo, RequireDistinctOutputsFindsEveryAlias) {
  fs::create_directories(dir_ / "ck");
  const std::string in = put("in.txt", "data");
  const std::string ck = (dir_ / "ck").string();
  auto clash = [&](const std::string& out_path, const std::string& in_path) {
    return error_of([&] { io::require_distinct_outputs({{"--data", in_path}}, {{"--out", out_path}}); });
  };
  const std::string none = "(no exception)";
  EXPECT_EQ(clash(in, in), "--out (" + in + ") would overwrite --data (" + in + ")");
  // Other spellings.
  const std::string dotted = (dir_ / "ck" / ".." / "." / "in.txt").string();
  EXPECT_EQ(clash(dotted, in), "--out (" + dotted + ") would overwrite --data (" + in + ")");
  // A hard link and a symbolic link to the input.
  fs::create_hard_link(in, dir_ / "hard.txt");
  fs::create_symlink(in, dir_ / "soft.txt");
  EXPECT_NE(clash((dir_ / "hard.txt").string(), in), none);
  EXPECT_NE(clash((dir_ / "soft.txt").string(), in), none);
  EXPECT_NE(clash(in, (dir_ / "soft.txt").string()), none);
  // An output inside an input directory, an input inside an output directory, also when neither
  // exists yet, and through a symbolic link to the directory.
  EXPECT_NE(clash((dir_ / "ck" / "heat.svg").string(), ck), none);
  EXPECT_NE(clash(ck + "/", (dir_ / "ck" / "config.json").string()), none);
  EXPECT_NE(clash((dir_ / "new" / "x" / "a.svg").string(), (dir_ / "new").string()), none);
  fs::create_directory_symlink(dir_ / "ck", dir_ / "cklink");
  EXPECT_NE(clash((dir_ / "cklink" / "heat.svg").string(), ck), none);
  // Distinct paths, near-miss names and empty (not given) paths pass.
  EXPECT_EQ(clash((dir_ / "out.txt").string(), in), none);
  EXPECT_EQ(clash((dir_ / "ck2" / "a").string(), ck), none);
  EXPECT_EQ(clash(ck + ".svg", ck), none);
  EXPECT_EQ(clash("", in), none);
  EXPECT_EQ(clash(in, ""), none);
  // Two outputs that are one file.
  EXPECT_EQ(error_of([&] {
              io::require_distinct_outputs({}, {{"--heatmap", (dir_ / "a.svg").string()}, {"--bars", (dir_ / "." / "a.svg").string()}});
            }),
            "--bars (" + (dir_ / "." / "a.svg").string() + ") would overwrite --heatmap (" + (dir_ / "a.svg").string() + ")");
  // Relative and absolute spellings of one path.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  EXPECT_NE(clash("in.txt", in), none);
  EXPECT_NE(clash("./ck/x", ck), none);
  fs::current_path(cwd);
}

TEST_F(FileIo, FlushStdoutOrThrowSeesAFailedWrite) {
  std::cout.flush();
  std::fflush(stdout);
  const int saved = ::dup(1);
  ASSERT_GE(saved, 0);
  const int full = ::open("/dev/full", O_WRONLY);
  ASSERT_GE(full, 0);
  ::dup2(full, 1);
  ::close(full);
  std::cout << "lost line\n";
  const std::string error = error_of([] { io::flush_stdout_or_throw(); });
  ::dup2(saved, 1);
  ::close(saved);
  std::clearerr(stdout);
  std::cout.clear();
  EXPECT_EQ(error, "stdout: write error (No space left on device)");
  EXPECT_EQ(error_of([] { io::flush_stdout_or_throw(); }), "(no exception)");
}

}  // namespace
