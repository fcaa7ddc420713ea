#pragma once
// Tensor memory: live-buffer accounting, and the caching allocator that every tensor buffer, tensor
// handle, autograd record and large backward closure comes from. Freed blocks wait in size-class
// free lists and are handed out again, so after the first training steps a step asks the system
// for no memory at all (tests/models/training/test_allocations.cpp counts). Each thread parks a few freed
// blocks of up to 64 KiB (256 KiB worth per size class, 8 to 64 blocks) for its own next
// allocations, so threads that allocate at the same time do not contend; parked blocks count as
// cached.
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace tg {

/// A failed allocation of tapegrad's allocator: the system had no memory (or address space) left
/// for `bytes()`. A std::bad_alloc, so code that catches that still does; what() says how much and,
/// when the caller knew, for what: "out of memory: 8.0 GiB (8589934592 bytes) for a float32 tensor
/// of shape [65536, 32768]" (Tensor::empty, through which every tensor buffer is made), or "...
/// requested from tapegrad's allocator" for other blocks. The message is built only when an
/// allocation fails.
class OutOfMemoryError : public std::bad_alloc {
 public:
  /// `what_for` completes "for ...", e.g. "a float32 tensor of shape [2, 3]"; empty when unknown.
  /// A `bytes` of SIZE_MAX stands for a size too large to count in a size_t.
  explicit OutOfMemoryError(std::size_t bytes, std::string_view what_for = {});
  const char* what() const noexcept override;
  /// The bytes that were asked for (SIZE_MAX: more than a size_t holds).
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  std::size_t bytes_;
  std::runtime_error message_;  // a reference-counted string: copying an exception cannot throw
};

}  // namespace tg

namespace tg::memory {

/// Bytes held by all tensor buffers alive in the process (as requested, not rounded to a class).
std::int64_t live_bytes();
/// Number of tensor buffers alive in the process.
std::int64_t live_buffers();

// ---- the caching allocator ---------------------------------------------------------------------

/// Alignment of every block: whole cache lines, and aligned AVX loads are always legal.
inline constexpr std::size_t kAlignment = 64;

/// A block of at least `bytes` (0 is allowed), kAlignment-aligned: a cached block of the same size
/// class when there is one, otherwise one from the system (::operator new, or mmap from 1 MiB).
/// A mapped block is made by resizing (mremap) the cached mapped block nearest in size when there
/// is one, so its pages are reused instead of unmapped and zeroed afresh. Thread-safe.
/// Throws tg::OutOfMemoryError (a std::bad_alloc) naming `bytes` when the system has no memory
/// left (after releasing the shared pool's cached blocks; those parked in other threads' caches
/// stay), or when `bytes` is beyond any size class (more than 2^62).
void* allocate(std::size_t bytes);
/// allocate(bytes), except that a block of 1 MiB or more may come from a cached block of one of
/// the next two size classes (at most 12.5% larger) when its own class has none: buffers
/// whose sizes change a little from step to step (a batch's token count) then reuse the cache
/// instead of mapping fresh memory. *block_bytes receives the block's size, which deallocate needs.
void* allocate_at_least(std::size_t bytes, std::size_t* block_bytes);
/// Returns a block to the cache (any thread may return any block). `bytes` must be the size it was
/// allocated with (or the block_bytes allocate_at_least gave). Goes back to the system instead
/// when the cache is at its limit.
void deallocate(void* block, std::size_t bytes) noexcept;
/// The size class of `bytes`: the usable size of the block allocate(bytes) returns. Multiples of
/// 64 up to 1 KiB, then four classes per power of two (at most 25% rounding, never more than the
/// next power of two), sixteen from 1 MiB (at most 6.25%).
std::size_t size_class_bytes(std::size_t bytes);

struct CacheStats {
  std::int64_t cached_bytes = 0;       ///< bytes waiting in the free lists and thread caches (block sizes)
  std::int64_t cached_blocks = 0;
  std::int64_t in_use_bytes = 0;       ///< bytes handed out and not yet returned (block sizes)
  std::int64_t in_use_blocks = 0;
  std::int64_t peak_in_use_bytes = 0;  ///< high-water mark of in_use_bytes (parked blocks included)
  std::int64_t peak_reserved_bytes = 0;  ///< high-water mark of in_use_bytes + cached_bytes
  std::int64_t system_allocs = 0;      ///< blocks taken from the system since the start
  std::int64_t system_frees = 0;       ///< blocks given back to the system since the start
  std::int64_t hits = 0;               ///< allocations served from the cache since the start
  std::int64_t remaps = 0;             ///< system_allocs made by resizing a cached block of another class (mremap)
  std::int64_t limit = 0;              ///< cache_limit()
};
CacheStats cache_stats();
/// Bytes waiting in the free lists.
std::int64_t cached_bytes();
/// Gives every cached block back to the system, every thread's parked blocks included (live
/// blocks are untouched).
void empty_cache();
/// Most bytes the allocator may hold, in use and cached together, before caching gives way: a block
/// freed above it goes back to the system, and before asking the system for a new block, cached
/// blocks of other classes go back first (largest first) so that in use + cached stays under it.
/// Blocks in use are never limited, nor are the few small blocks a thread parks for its own reuse
/// (setting a limit returns those parked so far to the pool first). Default: the peak bytes in
/// use plus 25% of them, at most plus 32 MiB, and at least 64 MiB: a training step's blocks stay
/// cached while peak RSS stays close to what the step really uses. Blocks from 1 MiB up are mapped
/// from the kernel directly (transparent huge pages requested) and unmapped when they go back, so
/// RSS drops as soon as they do.
/// A negative value restores the default; setting a lower limit trims the cache at once.
void set_cache_limit(std::int64_t bytes);
std::int64_t cache_limit();

}  // namespace tg::memory

namespace tg {

/// std-compatible allocator over the caching allocator: std::allocate_shared(PoolAllocator<T>())
/// and std::vector<T, PoolAllocator<T>> then reuse freed blocks instead of calling the system.
template <class T> struct PoolAllocator {
  using value_type = T;
  static_assert(alignof(T) <= memory::kAlignment, "PoolAllocator: over-aligned type");
  PoolAllocator() noexcept = default;
  template <class U> PoolAllocator(const PoolAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(memory::allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { memory::deallocate(p, n * sizeof(T)); }
  template <class U> bool operator==(const PoolAllocator<U>&) const noexcept { return true; }
};

/// A std::vector whose buffer comes from the caching allocator: scratch lists in hot paths.
template <class T> using PooledVector = std::vector<T, PoolAllocator<T>>;

}  // namespace tg
