// Autocast state (thread-local, as torch's) and the bf16 weight cache.
#include "autograd/autocast.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <vector>

#include "autograd/kernels/bf16_weights.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/tensor.h"

namespace tg::detail {
// Defined in tensor.cpp beside Storage, declared here rather than in tensor.h: only the cache reads
// the mark (autocast::mark_cacheable).
void mark_storage_cacheable(Storage& storage);
bool storage_cacheable(const Storage& storage);
}  // namespace tg::detail

namespace tg::autocast {

namespace {

/// One cached weight (a parameter, or a buffer marked by mark_cacheable) in one orientation, keyed
/// on its storage, its data pointer (a view of some of a parameter's rows is an entry of its own),
/// shape and orientation. Valid while its storage lives at the same address and the
/// storage's version counter (every write to a weight bumps it: in-place ops, copy_, fill_, the
/// optimizers, nn::init, the EMA swap; see autocast.h) is the one it was packed at. No
/// post-accumulate-grad hook is needed: an optimizer step bumps the version itself.
struct Entry {
  std::weak_ptr<Storage> storage;
  const void* data = nullptr;
  std::int64_t K = 0, N = 0, ldb = 0;
  bool trans = false;
  std::uint32_t version = 0;
  std::shared_ptr<kernels::bf16::PackedB> packed;
  std::shared_ptr<kernels::bf16::LazyPacked> other;
};

struct State {
  bool enabled = false;
  bool cache = true;
  int depth = 0;  // Guards open on this thread, enabled or not
  std::vector<Entry> entries;
  std::int64_t hits = 0, packs = 0;
};

thread_local State t_state;

/// True when `p` is held by the entry alone. A step's graph holds `other` until the graph is
/// freed; while it is held (a retained graph), the entry gets new objects and the graph keeps
/// reading the old ones. The fence pairs with the other holders' release of their reference, so
/// their reads happen before our writes.
template <class T> bool sole_owner(const std::shared_ptr<T>& p) {
  if (!p || p.use_count() != 1) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

void pack_into(Entry& e, const Tensor& w) {
  using kernels::bf16::LazyPacked;
  using kernels::bf16::PackedB;
  e.version = w._version();
  // Renewed in place when nobody else holds the old copies: a training step then allocates nothing.
  if (sole_owner(e.packed)) {
    kernels::bf16::pack_b(e.trans, e.K, e.N, w.data<float>(), e.ldb, *e.packed);
  } else {
    e.packed.reset();  // back to the caching allocator first, so that the new copy may reuse its block
    e.packed = std::make_shared<PackedB>(kernels::bf16::pack_b(e.trans, e.K, e.N, w.data<float>(), e.ldb));
  }
  if (sole_owner(e.other)) {
    e.other->reset();
  } else {
    e.other.reset();
    e.other = std::make_shared<LazyPacked>();
  }
  ++t_state.packs;
}

/// Drops the entries whose weight's buffer was freed (their copies can never be used again).
void drop_dead_entries() {
  std::erase_if(t_state.entries, [](const Entry& e) { return e.storage.expired(); });
}

}  // namespace

Guard::Guard(Precision precision, bool enabled, bool cache_enabled)
    : prev_enabled_(t_state.enabled), prev_cache_(t_state.cache) {
  t_state.enabled = enabled && precision == Precision::bf16;
  t_state.cache = cache_enabled;
  ++t_state.depth;
  if (t_state.enabled && !bf16_hardware()) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      std::fprintf(stderr, "tapegrad: bf16 requested, but this CPU has no avx512_bf16: products run the %s\n",
                   bf16_path());
  }
}

Guard::~Guard() {
  t_state.enabled = prev_enabled_;
  t_state.cache = prev_cache_;
  if (--t_state.depth == 0) drop_dead_entries();
}

bool is_enabled() { return t_state.enabled; }
bool bf16_hardware() { return kernels::bf16::hardware(); }
const char* bf16_path() { return kernels::bf16::path_name(kernels::bf16::default_path()); }

void clear_cache() { t_state.entries.clear(); }

void mark_cacheable(const Tensor& t) {
  if (t.defined() && t.impl()->storage) detail::mark_storage_cacheable(*t.impl()->storage);
}

bool is_cacheable(const Tensor& t) {
  if (!t.defined() || t.dtype() != DType::f32) return false;
  if (t.is_leaf() && t.requires_grad()) return true;
  return t.impl()->storage && detail::storage_cacheable(*t.impl()->storage);
}

CacheStats cache_stats() {
  CacheStats s;
  for (const Entry& e : t_state.entries) {
    ++s.entries;
    s.bytes += static_cast<std::int64_t>(e.packed->bytes());
  }
  s.hits = t_state.hits;
  s.packs = t_state.packs;
  return s;
}

}  // namespace tg::autocast

namespace tg::kernels::bf16 {

bool autocast_applies(const Tensor& a, const Tensor& b) {
  return autocast::t_state.enabled && a.dtype() == DType::f32 && b.dtype() == DType::f32;
}

CachedWeight cached_weight(const Tensor& w, bool trans_b, std::int64_t K, std::int64_t N, std::int64_t ldb) {
  using autocast::Entry;
  auto& st = autocast::t_state;
  if (!st.enabled || !st.cache || st.depth == 0 || !autocast::is_cacheable(w)) return {};
  const void* data = w.data<float>();
  const Storage* storage = w.impl()->storage.get();
  for (Entry& e : st.entries) {
    if (e.data != data || e.K != K || e.N != N || e.ldb != ldb || e.trans != trans_b) continue;
    if (e.storage.lock().get() != storage) continue;  // the address now belongs to another buffer
    if (w._version() != e.version) autocast::pack_into(e, w);
    else ++st.hits;
    return {e.packed, e.other};
  }
  autocast::drop_dead_entries();
  Entry e;
  e.storage = w.impl()->storage;
  e.data = data, e.K = K, e.N = N, e.ldb = ldb, e.trans = trans_b;
  autocast::pack_into(e, w);
  st.entries.push_back(std::move(e));
  return {st.entries.back().packed, st.entries.back().other};
}

}  // namespace tg::kernels::bf16
