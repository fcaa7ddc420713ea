// tg::dist over MPI (TG_HAVE_MPI), or the one-process stand-in without it.
#include "autograd/dist.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

#ifdef TG_HAVE_MPI
// The C API only: Open MPI's (deprecated) C++ bindings live in a library we do not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace tg::dist {

namespace {

bool g_initialized = false;
int g_rank = 0;
int g_size = 1;
#ifdef TG_HAVE_MPI
// Channel k's communicator: 0 = MPI_COMM_WORLD, then duplicates (see Channel in dist.h).
MPI_Comm g_comms[kChannels] = {MPI_COMM_NULL};
MPI_Comm comm(int channel) { return g_comms[channel]; }
#endif

double initial_timeout() {
  if (const char* s = std::getenv("TG_DIST_TIMEOUT")) {
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (end != s && *end == '\0' && v > 0) return v;
    std::fprintf(stderr, "tg::dist: TG_DIST_TIMEOUT='%s' is not a positive number of seconds; using 300\n", s);
  }
  return 300.0;
}
double g_timeout = initial_timeout();

/// Ranks mpirun started, from Open MPI's (or PMI's) environment; 0 when not under a launcher.
int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* s = std::getenv(name)) return std::atoi(s);
  return std::getenv("PMIX_RANK") ? 1 : 0;
}

std::size_t element_bytes(const Tensor& t, const char* op) {
  switch (t.dtype()) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i64: return 8;
    default: break;
  }
  throw std::invalid_argument(std::string("dist::") + op + ": dtype " + std::string(dtype_name(t.dtype())) +
                              " is not supported (f32, f64, i64)");
}

#ifdef TG_HAVE_MPI
[[noreturn]] void throw_mpi(const std::string& what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw std::runtime_error("dist::" + what + ": MPI error: " + std::string(text, static_cast<std::size_t>(len)));
}
void check_mpi(const std::string& what, int code) {
  if (code != MPI_SUCCESS) throw_mpi(what, code);
}
#endif

}  // namespace

bool available() {
#ifdef TG_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::string backend() {
#ifdef TG_HAVE_MPI
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, static_cast<std::size_t>(len));
  if (const auto nl = s.find_first_of("\r\n"); nl != std::string::npos) s.resize(nl);
  return s;
#else
  return "built without MPI";
#endif
}

Context::Context(int* argc, char*** argv) {
#ifdef TG_HAVE_MPI
  // Without a launcher the process is a world of one: skip MPI_Init, whose singleton start-up
  // costs about a second with Open MPI 4.1.
  if (launcher_world_size() == 0) return;
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw std::runtime_error("dist::Context: MPI_Init_thread failed");
    owns_ = true;
  }
  // Errors come back as codes and become exceptions naming the collective.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  g_comms[0] = MPI_COMM_WORLD;
  for (int k = 1; k < kChannels; ++k) {
    if (MPI_Comm_dup(MPI_COMM_WORLD, &g_comms[k]) != MPI_SUCCESS)
      throw std::runtime_error("dist::Context: MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(g_comms[k], MPI_ERRORS_RETURN);
  }
  g_initialized = true;
#else
  (void)argc;
  (void)argv;
  if (const int n = launcher_world_size(); n > 1)
    throw std::runtime_error("dist::Context: built without MPI, but launched as one of " + std::to_string(n) +
                             " ranks (rebuild with libopenmpi-dev installed)");
#endif
}

Context::~Context() {
#ifdef TG_HAVE_MPI
  if (!g_initialized) return;
  g_initialized = false;
  g_rank = 0;
  g_size = 1;
  int finalized = 0;
  MPI_Finalized(&finalized);
  for (int k = 1; k < kChannels; ++k)
    if (!finalized && g_comms[k] != MPI_COMM_NULL) MPI_Comm_free(&g_comms[k]);
  if (owns_ && !finalized) MPI_Finalize();
#endif
}

bool initialized() { return g_initialized; }
int rank() { return g_rank; }
int world_size() { return g_size; }
double timeout() { return g_timeout; }
void set_timeout(double seconds) {
  if (!(seconds > 0)) throw std::invalid_argument("dist::set_timeout: seconds must be > 0");
  g_timeout = seconds;
}

void abort(const std::string& why, int code) {
  std::fprintf(stderr, "tg::dist: rank %d of %d: %s\n", g_rank, g_size, why.c_str());
  std::fflush(stderr);
#ifdef TG_HAVE_MPI
  if (g_initialized) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

// ---- Request ------------------------------------------------------------------------------------
Request::Request(Request&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), active_(std::exchange(other.active_, false)),
      what_(std::move(other.what_)) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (active_) wait();
#ifdef TG_HAVE_MPI
    delete static_cast<MPI_Request*>(handle_);
#endif
    handle_ = std::exchange(other.handle_, nullptr);
    active_ = std::exchange(other.active_, false);
    what_ = std::move(other.what_);
  }
  return *this;
}

Request::~Request() {
  if (active_) wait();
#ifdef TG_HAVE_MPI
  delete static_cast<MPI_Request*>(handle_);
#endif
}

bool Request::test() {
  if (!active_) return true;
#ifdef TG_HAVE_MPI
  int done = 0;
  const int rc = MPI_Test(static_cast<MPI_Request*>(handle_), &done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) {
    active_ = false;
    throw_mpi(what_, rc);
  }
  if (done) active_ = false;
  return done != 0;
#else
  active_ = false;
  return true;
#endif
}

void Request::wait() {
  if (!active_) return;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto limit = std::chrono::duration<double>(g_timeout);
  // Spin briefly (a collective of a step is usually done or nearly), then back off to 1 ms sleeps
  // so a stalled wait does not take a core from the ranks still computing.
  for (int spins = 0; !test(); ++spins) {
    if (spins > 1000) {
      std::this_thread::sleep_for(std::chrono::microseconds(spins > 5000 ? 1000 : 50));
      if (Clock::now() - start > limit) {
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.1f", g_timeout);
        abort(what_ + ": no reply from every rank within " + secs +
              " s (TG_DIST_TIMEOUT); a rank died or stalled. Aborting the job; checkpoints already written are intact");
      }
    }
  }
}

Request iallgather(const void* send, std::size_t bytes, void* recv, const std::string& what, int channel) {
  return Request::exchange(Request::Exchange::allgather, send, bytes, recv, what, channel);
}

Request ialltoall(const void* send, std::size_t bytes, void* recv, const std::string& what, int channel) {
  return Request::exchange(Request::Exchange::alltoall, send, bytes, recv, what, channel);
}

Request Request::exchange(Exchange kind, const void* send, std::size_t bytes, void* recv, const std::string& what,
                          int channel) {
  Request r;
  r.what_ = std::string(kind == Exchange::allgather ? "allgather" : "alltoall") + " (" + what + ")";
  if (channel < 0 || channel >= kChannels) throw std::invalid_argument("dist::" + r.what_ + ": no channel " + std::to_string(channel));
#ifdef TG_HAVE_MPI
  if (g_initialized) {
    if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::invalid_argument("dist::" + r.what_ + ": " + std::to_string(bytes) +
                                  " bytes per rank exceed MPI's int count; use smaller buckets");
    auto* h = new MPI_Request(MPI_REQUEST_NULL);
    r.handle_ = h;
    const int n = static_cast<int>(bytes);
    check_mpi(r.what_, kind == Exchange::allgather
                           ? MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm(channel), h)
                           : MPI_Ialltoall(send, n, MPI_BYTE, recv, n, MPI_BYTE, comm(channel), h));
    r.active_ = true;
    return r;
  }
#endif
  if (recv != send && bytes > 0) std::memcpy(recv, send, bytes);
  return r;
}

Request ibroadcast(void* buffer, std::size_t bytes, int root, const std::string& what) {
  Request r;
  r.what_ = "broadcast (" + what + ")";
  if (root < 0 || root >= g_size)
    throw std::invalid_argument("dist::" + r.what_ + ": root " + std::to_string(root) + " is not a rank of " +
                                std::to_string(g_size));
#ifdef TG_HAVE_MPI
  if (g_initialized) {
    if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::invalid_argument("dist::" + r.what_ + ": " + std::to_string(bytes) + " bytes exceed MPI's int count");
    auto* h = new MPI_Request(MPI_REQUEST_NULL);
    r.handle_ = h;
    check_mpi(r.what_, MPI_Ibcast(buffer, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD, h));
    r.active_ = true;
  }
#else
  (void)buffer;
  (void)bytes;
#endif
  return r;
}

Request ibarrier(const std::string& what) {
  Request r;
  r.what_ = "barrier (" + what + ")";
#ifdef TG_HAVE_MPI
  if (g_initialized) {
    auto* h = new MPI_Request(MPI_REQUEST_NULL);
    r.handle_ = h;
    check_mpi(r.what_, MPI_Ibarrier(MPI_COMM_WORLD, h));
    r.active_ = true;
  }
#endif
  return r;
}

void barrier() { ibarrier("barrier").wait(); }

void broadcast(Tensor& t, int root) {
  const std::size_t eb = element_bytes(t, "broadcast");
  // Sizes first, so a shape mismatch is an error instead of a truncated or overlong message.
  double mine = static_cast<double>(t.numel()) * static_cast<double>(eb);
  double theirs = mine;
  ibroadcast(&theirs, sizeof theirs, root, "size").wait();
  if (theirs != mine)
    throw std::invalid_argument("dist::broadcast: this rank's tensor has " + std::to_string(t.numel() * static_cast<std::int64_t>(eb)) +
                                " bytes, rank " + std::to_string(root) + "'s has " +
                                std::to_string(static_cast<std::int64_t>(theirs)));
  ibroadcast(t.data_ptr(), static_cast<std::size_t>(t.numel()) * eb, root, "tensor").wait();
}

void allreduce_sum(Tensor& t) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64)
    throw std::invalid_argument(std::string("dist::allreduce_sum: dtype ") + std::string(dtype_name(t.dtype())) +
                                " is not supported (f32, f64)");
  if (g_size == 1) return;
  const std::size_t eb = element_bytes(t, "allreduce_sum");
  const auto n = static_cast<std::size_t>(t.numel());
  // Every rank must send the same number of bytes; check before the gather.
  const std::vector<double> sizes = allgather(static_cast<double>(n), "allreduce_sum size");
  for (int r = 0; r < g_size; ++r)
    if (sizes[static_cast<std::size_t>(r)] != static_cast<double>(n))
      throw std::invalid_argument("dist::allreduce_sum: rank " + std::to_string(r) + " has " +
                                  std::to_string(static_cast<std::int64_t>(sizes[static_cast<std::size_t>(r)])) +
                                  " elements, this rank " + std::to_string(n));
  std::vector<unsigned char> all(n * eb * static_cast<std::size_t>(g_size));
  iallgather(t.data_ptr(), n * eb, all.data(), "allreduce_sum").wait();
  auto sum = [&](auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    std::vector<const T*> parts(static_cast<std::size_t>(g_size));
    for (int r = 0; r < g_size; ++r) parts[static_cast<std::size_t>(r)] = reinterpret_cast<const T*>(all.data()) + n * static_cast<std::size_t>(r);
    tree_sum(parts.data(), parts.size(), n, out);
  };
  if (t.dtype() == DType::f32)
    sum(t.data<float>());
  else
    sum(t.data<double>());
}

std::vector<double> allgather(double value, const std::string& what) {
  std::vector<double> out(static_cast<std::size_t>(g_size), value);
  iallgather(&value, sizeof value, out.data(), what).wait();
  return out;
}

}  // namespace tg::dist
