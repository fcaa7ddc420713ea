// Out of memory (tg::OutOfMemoryError, autograd/memory.h): a failed allocation names the bytes and,
// for a tensor, its dtype and shape, and is still a std::bad_alloc. No test commits memory: the
// sizes are beyond any address space (2^50 bytes: x86-64 gives a process 2^47 without asking for
// more), or the allocation is refused by an address-space limit set in a forked child.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "autograd/dtype.h"
#include "autograd/memory.h"
#include "autograd/shape.h"
#include "autograd/tensor.h"

using namespace tg;

namespace {

constexpr std::int64_t kPiBFloats = std::int64_t{1} << 24;  // [2^24, 2^24] float32: 2^50 bytes

/// The OutOfMemoryError f() throws (the test fails if it throws nothing or something else).
template <class F> OutOfMemoryError oom_of(F&& f) {
  try {
    f();
  } catch (const OutOfMemoryError& e) {
    return e;
  }
  ADD_FAILURE() << "no OutOfMemoryError";
  return OutOfMemoryError(0);
}

}  // namespace

TEST(OutOfMemory, TensorBeyondTheAddressSpaceNamesBytesDtypeAndShape) {
  const auto before = memory::cache_stats();
  const auto live = memory::live_buffers();
  const OutOfMemoryError e = oom_of([] { Tensor::empty(Shape{kPiBFloats, kPiBFloats}, DType::f32); });
  EXPECT_STREQ(e.what(), "out of memory: 1.0 PiB (1125899906842624 bytes) for a float32 tensor of shape "
                         "[16777216, 16777216]");
  EXPECT_EQ(e.bytes(), std::size_t{1} << 50);
  // Nothing stays counted as in use or alive after the failure.
  EXPECT_EQ(memory::cache_stats().in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(memory::live_buffers(), live);
  // Code that knows only std::bad_alloc still catches it; the factories built on empty report the
  // same way.
  EXPECT_THROW(Tensor::zeros(Shape{kPiBFloats, kPiBFloats}), std::bad_alloc);
  const OutOfMemoryError f64 = oom_of([] { Tensor::ones(Shape{4, kPiBFloats, kPiBFloats / 4}, DType::f64); });
  EXPECT_STREQ(f64.what(), "out of memory: 2.0 PiB (2251799813685248 bytes) for a float64 tensor of shape "
                           "[4, 16777216, 4194304]");
  // The allocator still serves what fits.
  const Tensor small = Tensor::ones(Shape{3});
  EXPECT_EQ(small.data<float>()[2], 1.0f);
}

TEST(OutOfMemory, AllocatorBlockWithoutACallerNamesTheBytesAskedFor) {
  const std::size_t bytes = (std::size_t{1} << 50) + 1;  // its size class is larger; the message
  const OutOfMemoryError e = oom_of([&] { memory::allocate(bytes); });  // gives the request
  EXPECT_STREQ(e.what(), "out of memory: 1.0 PiB (1125899906842625 bytes) requested from tapegrad's allocator");
  EXPECT_EQ(e.bytes(), bytes);
  // Beyond the largest size class (2^62 bytes): refused before any system call.
  const OutOfMemoryError beyond = oom_of([] { memory::allocate(std::size_t{1} << 63); });
  EXPECT_STREQ(beyond.what(), "out of memory: 8.0 EiB (9223372036854775808 bytes) requested from tapegrad's allocator");
  std::size_t got = 0;
  EXPECT_THROW(memory::allocate_at_least(std::size_t{3} << 48, &got), std::bad_alloc);
}

TEST(OutOfMemory, ShapeWhoseByteCountOverflowsIsRefusedBeforeAllocating) {
  const auto before = memory::cache_stats();
  const OutOfMemoryError e = oom_of([] { Tensor::empty(Shape{std::int64_t{1} << 32, std::int64_t{1} << 32}, DType::b8); });
  EXPECT_STREQ(e.what(), "out of memory: more than 16 EiB (the size overflows) for a bool tensor of shape "
                         "[4294967296, 4294967296]");
  EXPECT_EQ(e.bytes(), SIZE_MAX);
  EXPECT_EQ(memory::cache_stats().system_allocs, before.system_allocs);
  // 2^63 bytes and more: no allocation could succeed, so none is tried.
  const OutOfMemoryError big = oom_of([] { Tensor::empty(Shape{std::int64_t{1} << 61, 4}, DType::f64); });
  EXPECT_STREQ(big.what(), "out of memory: more than 16 EiB (the size overflows) for a float64 tensor of shape "
                           "[2305843009213693952, 4]");
  const OutOfMemoryError half = oom_of([] { Tensor::empty(Shape{std::int64_t{1} << 62, 2}, DType::b8); });
  EXPECT_STREQ(half.what(), "out of memory: 8.0 EiB (9223372036854775808 bytes) for a bool tensor of shape "
                            "[4611686018427387904, 2]");
  // A dimension of 0 makes an empty tensor, even when the other dimensions' bytes overflow.
  const Tensor empty = Tensor::empty(Shape{std::int64_t{1} << 62, 0}, DType::f32);
  EXPECT_EQ(empty.numel(), 0);
}

// A size a machine could have, refused by the system: the child process lowers its address-space
// limit to what it already uses plus 64 MiB and asks for a 256 MiB tensor. The message comes back
// through a pipe.
TEST(OutOfMemory, TensorRefusedUnderAnAddressSpaceLimitInAChildProcess) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the child: only async-signal-safe exits, no gtest
    ::close(fds[0]);
    int code = 0;
    std::string message;
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t used = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE));
    const rlimit limit{used + (rlim_t{64} << 20), used + (rlim_t{64} << 20)};
    if (pages <= 0 || ::setrlimit(RLIMIT_AS, &limit) != 0) {
      code = 3;
      message = "could not set RLIMIT_AS";
    } else {
      try {
        Tensor t = Tensor::empty(Shape{64, 1024, 1024}, DType::f32);
        code = 1;
        message = "no exception";
      } catch (const OutOfMemoryError& e) {
        message = e.what();
        // After the failure, what fits is still served.
        if (Tensor::empty(Shape{1024}).numel() != 1024) code = 4;
      } catch (const std::exception& e) {
        code = 2;
        message = std::string("another exception: ") + e.what();
      }
    }
    const char* p = message.data();
    for (std::size_t left = message.size(); left > 0;) {
      const ssize_t n = ::write(fds[1], p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child ended on signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << message;
  EXPECT_EQ(message, "out of memory: 256.0 MiB (268435456 bytes) for a float32 tensor of shape [64, 1024, 1024]");
}
