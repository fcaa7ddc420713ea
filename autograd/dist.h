#pragma once
// tg::dist: collectives on tensors over MPI (Debian's OpenMPI), for data-parallel training
// (nn/distributed.h) launched with `mpirun -np N program ...`.
//
//   tg::dist::Context mpi(&argc, &argv);          // MPI_Init_thread; MPI_Finalize when it goes
//   tg::dist::broadcast(w, 0);                     // every rank gets rank 0's values
//   tg::dist::allreduce_sum(g);                    // the same sum, bit for bit, on every rank
//
// Deterministic: allreduce_sum does not use MPI_Allreduce (whose summation order depends on the
// implementation and the message sizes). Every rank gathers every rank's contribution
// (MPI_Allgather) and adds them itself with tree_sum's fixed pairwise order, so the result is
// identical on every rank and in every run. (DDP's buckets use the bandwidth-optimal variant:
// an all-to-all of fixed chunks, each rank sums its chunk in rank order, an allgather of the
// sums: 2 (N-1)/N of the bytes per rank, as a ring allreduce.)
//
// Bounded waits: every collective is started non-blocking and waited for with MPI_Test polling;
// after timeout() seconds (TG_DIST_TIMEOUT, default 300) the waiting rank prints which collective
// stalled and calls MPI_Abort, which makes mpirun stop every rank. A rank that dies is handled by
// mpirun itself, which kills the others.
//
// Built without MPI (CMake did not find it), or not initialised: one process, rank 0 of 1; the
// collectives do nothing (a sum over one rank is its contribution). backend() says which.
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace tg::dist {

/// True when the library was built with MPI.
bool available();
/// "Open MPI v4.1.4, ..." (the library version string) or "built without MPI".
std::string backend();

/// Initialises MPI for the process (thread level FUNNELED: only the thread that made the Context
/// calls MPI) and finalizes it when destroyed. One per process. Without MPI, or when the process
/// was not started by mpirun (no launcher in the environment: MPI is then not initialised at all),
/// it stands for a world of one. Throws std::runtime_error
/// ("dist::Context: ...") if MPI cannot start, or if the build has no MPI but mpirun started
/// several ranks (they would all train alone).
class Context {
 public:
  Context(int* argc = nullptr, char*** argv = nullptr);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

 private:
  bool owns_ = false;
};

/// True between a Context's construction and its destruction, in a process started by mpirun
/// (with MPI).
bool initialized();
/// This process's rank, 0 when not initialised.
int rank();
/// Number of ranks, 1 when not initialised.
int world_size();

/// Seconds a rank waits for a collective before it aborts the job (> 0). Starts at
/// TG_DIST_TIMEOUT from the environment, else 300.
double timeout();
void set_timeout(double seconds);

/// Prints "tg::dist: rank R of N: <why>" on stderr and ends the whole job: MPI_Abort with an MPI world,
/// std::exit otherwise. For errors after which the ranks can no longer agree.
[[noreturn]] void abort(const std::string& why, int code = 1);

/// Waits for every rank.
void barrier();
/// Overwrites `t` (f32, f64 or i64, contiguous) with rank `root`'s values. Shapes and dtypes must
/// match on every rank (the bytes are checked: a mismatch throws on the ranks that see it).
void broadcast(Tensor& t, int root = 0);
/// Replaces `t` (f32 or f64) in place by the sum over ranks of every rank's `t`, added in the
/// fixed order of tree_sum over ranks 0..N-1: bit-identical on every rank and every run.
void allreduce_sum(Tensor& t);

/// Sum of `n` equal-length arrays parts[0..n) into out (may alias parts[0]), pairwise in a fixed
/// tree: tree(a, b) = b - a == 1 ? parts[a] : tree(a, m) + tree(m, b) with m = a + (b - a) / 2.
/// For n = 2^k the tree over n parts equals the tree over any 2^j contiguous blocks of the
/// per-block trees, which is what makes a sum split over 2^j ranks give the same bits.
template <class T> void tree_sum(const T* const* parts, std::size_t n, std::size_t len, T* out);

/// A non-blocking collective in flight (MPI_Request). wait() polls it up to timeout() and aborts
/// the job past that; destroying an unfinished one waits for it.
class Request {
 public:
  Request() = default;
  Request(Request&& other) noexcept;
  Request& operator=(Request&& other) noexcept;
  ~Request();
  /// True once complete (also true for an empty Request). Lets MPI make progress.
  bool test();
  /// Blocks until complete, at most timeout() seconds (then abort()).
  void wait();
  bool active() const { return active_; }

 private:
  // iallgather and ialltoall: the same checks, request and one-process copy, one MPI call apart.
  enum class Exchange { allgather, alltoall };
  static Request exchange(Exchange kind, const void* send, std::size_t bytes, void* recv, const std::string& what,
                          int channel);
  friend Request iallgather(const void*, std::size_t, void*, const std::string&, int);
  friend Request ialltoall(const void*, std::size_t, void*, const std::string&, int);
  friend Request ibroadcast(void*, std::size_t, int, const std::string&);
  friend Request ibarrier(const std::string&);
  void* handle_ = nullptr;  // MPI_Request, boxed so this header does not include mpi.h
  bool active_ = false;
  std::string what_;
};

/// Channels: separate communicators. Every rank must start the collectives of one channel in the
/// same order, but collectives of different channels may interleave differently on each rank
/// (DDP starts its buckets' two phases on channels 1 and 2 as each rank's data becomes ready).
constexpr int kChannels = 3;

/// Starts gathering `bytes` bytes from every rank into `recv` (world_size() * bytes, rank order).
/// Both buffers must stay alive and untouched until the request completes. `what` names the
/// collective in errors ("DDP bucket 3").
Request iallgather(const void* send, std::size_t bytes, void* recv, const std::string& what, int channel = 0);
/// Starts an all-to-all: block r of `send` (`bytes` each, world_size() blocks) goes to rank r;
/// `recv` receives every rank's block for this rank, in rank order.
Request ialltoall(const void* send, std::size_t bytes, void* recv, const std::string& what, int channel = 0);
/// Starts a broadcast of `bytes` bytes from `root`.
Request ibroadcast(void* buffer, std::size_t bytes, int root, const std::string& what);
Request ibarrier(const std::string& what);

/// Allgather of one double per rank (small metadata such as losses and flags), blocking.
std::vector<double> allgather(double value, const std::string& what);

// ---- implementation ---------------------------------------------------------------------------
namespace detail {
template <class T>
void tree_sum_chunk(const T* const* parts, std::size_t a, std::size_t b, std::size_t i0, std::size_t len, T* dst,
                    T* scratch) {
  if (b - a == 1) {
    if (dst != parts[a] + i0) std::memcpy(dst, parts[a] + i0, len * sizeof(T));
    return;
  }
  const std::size_t m = a + (b - a) / 2;
  tree_sum_chunk(parts, a, m, i0, len, dst, scratch + len);
  tree_sum_chunk(parts, m, b, i0, len, scratch, scratch + len);
  for (std::size_t i = 0; i < len; ++i) dst[i] += scratch[i];
}
}  // namespace detail

template <class T> void tree_sum(const T* const* parts, std::size_t n, std::size_t len, T* out) {
  if (n == 0) {
    std::memset(out, 0, len * sizeof(T));
    return;
  }
  constexpr std::size_t kChunk = 2048;  // the tree's partial sums stay in L1/L2
  std::size_t depth = 1;
  while ((std::size_t{1} << depth) < n) ++depth;
  std::vector<T> scratch(kChunk * (depth + 1));
  for (std::size_t i0 = 0; i0 < len; i0 += kChunk) {
    const std::size_t c = len - i0 < kChunk ? len - i0 : kChunk;
    detail::tree_sum_chunk(parts, 0, n, i0, c, out + i0, scratch.data());
  }
}

}  // namespace tg::dist
