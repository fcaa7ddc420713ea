#pragma once
// The tape: a thread-local, append-only record of differentiable ops in execution order.
// backward() walks it in reverse from one tensor and accumulates gradients into leaves.
//
// Writing an op (see docs/extending.md): compute the output with a kernel, then
//
//   return record("tanh", y, {x}, [y](BackwardContext& ctx) {
//     ctx.accumulate(0, ctx.grad_output() * (1.0 - y * y));  // d tanh(x) / dx = 1 - tanh(x)^2
//   });
//
// The closure captures only what the backward needs, and record() is told which of the op's
// inputs and output that is (Saves, below: here the output), so that an in-place change to one of
// them before the backward is caught. Rules: never modify grad_output() or a captured tensor in place; accumulate() adds, so an op whose input appears twice just calls it
// twice. A gradient the op can add in place more cheaply than it can build (a product, a slice)
// goes to the same accumulate as a term (below). Recording allocates nothing from the system in
// steady state: the closure is stored inline in the node (BackwardFn, up to 192 bytes of
// captures), the inputs in an array the tape reuses, and tensors and autograd records come from
// the caching allocator (autograd/memory.h).
//
// Higher-order gradients (create_graph): an op may pass a second closure to record(), its
// differentiable backward, written with public tg ops on graph tensors (GradGraphContext below).
// It is stored with the kernel closure in one BackwardFn and runs only in a backward with
// create_graph; there the kernel closure does not run. See docs/extending.md.
#include <cstddef>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace tg {

/// A leaf's register_post_accumulate_grad_hook state, apart from AutogradMeta so that every other
/// tensor's autograd record stays small.
struct PostAccumulateHooks {
  std::vector<std::pair<std::uint64_t, PostAccumulateGradHook>> hooks;  // in order (id, hook)
  std::weak_ptr<TensorImpl> tensor;     // the handle the hooks receive
  std::uint64_t accumulated_pass = 0;   // the last backward pass that added to grad
  std::uint64_t scheduled_pass = 0;     // the last pass that scheduled the hooks,
  std::int64_t after = -1;              //   and the lowest node index that could add to grad in it
};

struct AutogradMeta {
  Tensor grad;                  // leaves: accumulated gradient; op outputs: pending during backward
  Tensor retained_grad;         // op outputs with retain_grad: the last backward's gradient
  std::vector<std::pair<std::uint64_t, GradHook>> hooks;  // register_hook, in order (id, hook)
  std::unique_ptr<PostAccumulateHooks> post_accumulate;  // leaves with such hooks only
  bool retain_grad = false;
  std::shared_ptr<CompactGrad> compact;  // leaves: the gradient in compact form (then grad is undefined)
  bool requires_grad = false;
  bool allow_compact = false;   // leaves: backward may keep the gradient in compact form
  bool is_leaf = true;
  std::int64_t node = -1;       // index of the producing node on its tape
  std::uint64_t epoch = 0;      // tape epoch of that node (a reset tape starts a new epoch)
  const void* tape = nullptr;   // the thread-local tape it was recorded on
};

class BackwardContext;
class GradGraphContext;

/// An op's backward closure, like std::function<void(BackwardContext&)> but without its heap
/// allocation: captures up to kInlineBytes (every op in this library) live inside the object;
/// larger ones go to a block of the caching allocator. Move-only.
class BackwardFn {
 public:
  static constexpr std::size_t kInlineBytes = 192;

  BackwardFn() noexcept = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, BackwardFn> &&
                                              std::is_invocable_v<std::decay_t<F>&, BackwardContext&>>>
  BackwardFn(F&& f) {  // NOLINT: implicit, as std::function
    emplace(std::forward<F>(f));
  }
  BackwardFn(BackwardFn&& other) noexcept { take(other); }
  BackwardFn& operator=(BackwardFn&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  BackwardFn& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  ~BackwardFn() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  void operator()(BackwardContext& ctx) { ops_->call(buf_, ctx); }
  /// Whether the closure has a differentiable backward (a `graph(GradGraphContext&)` member).
  bool has_graph() const noexcept { return ops_ != nullptr && ops_->call_graph != nullptr; }
  void call_graph(GradGraphContext& ctx) { ops_->call_graph(buf_, ctx); }

  /// Replaces the closure with `f` (decayed copy or move).
  template <class F> void emplace(F&& f);
  void reset() noexcept {
    if (ops_) ops_->destroy(buf_);
    ops_ = nullptr;
  }

 private:
  struct Ops {
    void (*call)(void* self, BackwardContext& ctx);
    void (*call_graph)(void* self, GradGraphContext& ctx);  // null: no differentiable backward
    void (*move)(void* dst, void* src) noexcept;  // move-constructs dst from src, then destroys src
    void (*destroy)(void* self) noexcept;
  };
  template <class C> static const Ops kInline;
  template <class C> static const Ops kHeap;
  static void* heap_allocate(std::size_t bytes);
  static void heap_free(void* p, std::size_t bytes) noexcept;

  void take(BackwardFn& other) noexcept {
    if (other.ops_) other.ops_->move(buf_, other.buf_);
    ops_ = other.ops_;
    other.ops_ = nullptr;
  }

  alignas(16) unsigned char buf_[kInlineBytes];
  const Ops* ops_ = nullptr;
};

namespace detail {
template <class C>
concept HasGraph = requires(C& c, GradGraphContext& g) { c.graph(g); };
template <class C> constexpr void (*graph_caller(bool heap))(void*, GradGraphContext&) {
  if constexpr (HasGraph<C>) {
    if (heap) return [](void* self, GradGraphContext& g) { (**static_cast<C**>(self)).graph(g); };
    return [](void* self, GradGraphContext& g) { static_cast<C*>(self)->graph(g); };
  } else {
    return nullptr;
  }
}
}  // namespace detail

template <class C>
inline const BackwardFn::Ops BackwardFn::kInline = {
    [](void* self, BackwardContext& ctx) { (*static_cast<C*>(self))(ctx); },
    detail::graph_caller<C>(false),
    [](void* dst, void* src) noexcept {
      new (dst) C(std::move(*static_cast<C*>(src)));
      static_cast<C*>(src)->~C();
    },
    [](void* self) noexcept { static_cast<C*>(self)->~C(); }};

template <class C>
inline const BackwardFn::Ops BackwardFn::kHeap = {
    [](void* self, BackwardContext& ctx) { (**static_cast<C**>(self))(ctx); },
    detail::graph_caller<C>(true),
    [](void* dst, void* src) noexcept { *static_cast<C**>(dst) = *static_cast<C**>(src); },
    [](void* self) noexcept {
      C* c = *static_cast<C**>(self);
      c->~C();
      heap_free(c, sizeof(C));
    }};

template <class F> void BackwardFn::emplace(F&& f) {
  using C = std::decay_t<F>;
  static_assert(std::is_invocable_v<C&, BackwardContext&>, "a backward closure takes (BackwardContext&)");
  reset();
  if constexpr (sizeof(C) <= kInlineBytes && alignof(C) <= 16 && std::is_nothrow_move_constructible_v<C>) {
    new (buf_) C(std::forward<F>(f));
    ops_ = &kInline<C>;
  } else {
    static_assert(alignof(C) <= 64, "backward closure over-aligned");
    void* p = heap_allocate(sizeof(C));
    try {
      new (p) C(std::forward<F>(f));
    } catch (...) {
      heap_free(p, sizeof(C));
      throw;
    }
    *reinterpret_cast<C**>(buf_) = static_cast<C*>(p);
    ops_ = &kHeap<C>;
  }
}

namespace detail {
/// A gradient term seen through function pointers (BackwardContext::accumulate builds one on the
/// stack: no allocation). Null members are what the term does not offer.
struct GradTermRef {
  const void* term;
  void (*add_into)(const void* term, Tensor& buffer);
  Tensor (*make)(const void* term);
  std::shared_ptr<CompactGrad> (*compact)(const void* term);
};
}  // namespace detail

/// What an op's backward closure sees: the gradient of its output, and one way to deliver the
/// gradients of its inputs (by position in the input list given to record()): accumulate.
class BackwardContext {
 public:
  const Tensor& grad_output() const { return grad_output_; }
  /// False when input `i` does not require grad: the closure may skip computing it.
  bool needs_grad(int i) const;
  /// True when this backward keeps the graph (retain_graph): the closure will run again, so it
  /// must not consume or overwrite what it captured.
  bool retain_graph() const { return retain_graph_; }

  /// Adds `grad` (shape and dtype of input i) to input i's gradient.
  void accumulate(int i, Tensor grad);

  /// The same for a gradient given as a term instead of a tensor, so that the tape can choose the
  /// cheapest way to add it. A term is a callable `void(Tensor& buffer)`, or an object with
  ///   void add_into(Tensor& buffer) const   adds the gradient into `buffer` (input i's shape, dtype)
  /// and/or
  ///   Tensor make() const                   the gradient as a new tensor
  /// and optionally
  ///   std::shared_ptr<CompactGrad> compact() const   a smaller exact form, or null
  /// The tape calls add_into on the gradient input i already has when it may be changed in place
  /// (a product added with beta = 1, a slice added where it belongs: no temporary per time step);
  /// make() when there is none yet (or zeros, then add_into); compact() first when input i is a leaf
  /// that allows compact gradients and has none yet (autograd/compact_grad.h). Every path gives the
  /// same gradient up to rounding; which one runs is the tape's business, not the op's.
  template <class Term>
    requires(!std::is_convertible_v<const Term&, Tensor>)
  void accumulate(int i, const Term& term);

 private:
  friend class Engine;
  BackwardContext(void* node, Tensor grad_output, bool retain_graph)
      : node_(node), grad_output_(std::move(grad_output)), retain_graph_(retain_graph) {}
  void accumulate_term(int i, const detail::GradTermRef& term);
  void* node_;
  Tensor grad_output_;
  bool retain_graph_;
};

template <class Term>
  requires(!std::is_convertible_v<const Term&, Tensor>)
void BackwardContext::accumulate(int i, const Term& term) {
  constexpr bool callable = std::is_invocable_v<const Term&, Tensor&>;
  constexpr bool adds = requires(const Term& t, Tensor& b) { t.add_into(b); };
  constexpr bool makes = requires(const Term& t) { { t.make() } -> std::convertible_to<Tensor>; };
  constexpr bool compacts = requires(const Term& t) { { t.compact() } -> std::convertible_to<std::shared_ptr<CompactGrad>>; };
  static_assert(callable || adds || makes, "a gradient term is a callable void(Tensor&) or has add_into() and/or make()");
  detail::GradTermRef ref{&term, nullptr, nullptr, nullptr};
  if constexpr (callable) ref.add_into = [](const void* t, Tensor& b) { (*static_cast<const Term*>(t))(b); };
  else if constexpr (adds) ref.add_into = [](const void* t, Tensor& b) { static_cast<const Term*>(t)->add_into(b); };
  if constexpr (makes) ref.make = [](const void* t) -> Tensor { return static_cast<const Term*>(t)->make(); };
  if constexpr (compacts)
    ref.compact = [](const void* t) -> std::shared_ptr<CompactGrad> { return static_cast<const Term*>(t)->compact(); };
  accumulate_term(i, ref);
}

/// What an op's differentiable backward sees in a backward with create_graph. Everything is a graph
/// tensor and the closure computes with public tg ops (GradMode is on), so the gradients it
/// delivers are themselves differentiable: their graph is what a second backward walks.
class GradGraphContext {
 public:
  /// The gradient of the op's output; it requires grad when it depends on something that does.
  const Tensor& grad_output() const { return grad_output_; }
  /// False when input `i` does not require grad: the closure may skip it.
  bool needs_grad(int i) const;
  /// Shape of input `i` (for summing a broadcast gradient back to it).
  Shape input_shape(int i) const;
  int num_inputs() const;
  /// The op's output as a graph tensor with the data of `value` (the output the closure saved),
  /// so that a formula in terms of the output (tanh' = 1 - y²) differentiates through the op.
  Tensor output(const Tensor& value) const;
  /// Input i as a graph tensor with the data of `value` (a saved copy of that input, e.g. the
  /// kernel closure's detached one), for a closure object that keeps one handle for both backwards.
  Tensor input(int i, const Tensor& value) const;
  /// Adds `grad` (input i's shape and dtype) to input i's gradient, recording the addition.
  void accumulate(int i, const Tensor& grad);
  /// Adds `grad` summed to input i's shape (the broadcast dimensions summed away).
  void accumulate_sum_to(int i, const Tensor& grad);
  /// For fused ops: `recomputed` is the op's output computed again, inside this closure, from the
  /// op's inputs with composed public ops; its graph is walked with grad_output() as the seed, which
  /// delivers every input's gradient (differentiable, since the composed ops have differentiable
  /// backwards). Call it once, as the closure's only delivery.
  void backward_through(const Tensor& recomputed);

 private:
  friend class Engine;
  GradGraphContext(std::size_t node, Tensor grad_output, std::size_t first_new, bool retain_graph)
      : node_(node), grad_output_(std::move(grad_output)), first_new_(first_new), retain_graph_(retain_graph) {}
  std::size_t node_;  // an index: the tape's node array may grow while the closure records
  Tensor grad_output_;
  std::size_t first_new_;  // the first node recorded by this closure
  bool retain_graph_;
};

namespace detail {
/// An op's kernel closure and its differentiable backward, stored together in one BackwardFn.
template <class F, class G> struct WithGraph {
  F backward;
  G graph_backward;
  void operator()(BackwardContext& ctx) { backward(ctx); }
  void graph(GradGraphContext& ctx) { graph_backward(ctx); }
};
template <class F, class G> WithGraph<std::decay_t<F>, std::decay_t<G>> with_graph(F&& f, G&& g) {
  return {std::forward<F>(f), std::forward<G>(g)};
}
}  // namespace detail

/// Whether ops are recorded on this thread (false inside NoGradGuard and during a backward without
/// create_graph).
struct GradMode {
  static bool enabled();
  static void set_enabled(bool enabled);
};

/// RAII: nothing is recorded while it lives, so no graph memory is kept (eval, decoding,
/// optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// RAII: ops are recorded while it lives, even inside a NoGradGuard (torch.enable_grad). For code
/// that takes gradients itself when its caller turned recording off (a gradient penalty checked by
/// gradcheck, whose finite-difference pass runs under NoGradGuard).
class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(GradMode::enabled()) { GradMode::set_enabled(true); }
  ~EnableGradGuard() { GradMode::set_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

/// Anomaly mode (torch.autograd.detect_anomaly), per thread: while on, every gradient an op's
/// backward produces is checked for NaN and infinity, and the first bad one throws
/// std::runtime_error naming the op, its tape node and the AnomalyScope labels that were active
/// when its forward was recorded, e.g.
///   backward of 'log' (tape node 7, recorded in "encoder/layer1") produced NaN in the gradient of
///   input 0 (shape [2, 3] float64)
/// C++ has no portable stack trace, so the labels are how a forward site is named: put
/// AnomalyScope in the forward code you want to tell apart. Off, it costs one flag test per
/// record() and per gradient. On, it costs a pass over every gradient, a string per recorded op,
/// and gradients are built as separate tensors (no in-place or compact accumulation).
bool is_anomaly_enabled();
void set_detect_anomaly(bool enabled);

/// RAII: anomaly mode on (or `enabled`) for its lifetime, the previous setting restored after.
class detect_anomaly {
 public:
  explicit detect_anomaly(bool enabled = true) : previous_(is_anomaly_enabled()) { set_detect_anomaly(enabled); }
  ~detect_anomaly() { set_detect_anomaly(previous_); }
  detect_anomaly(const detect_anomaly&) = delete;
  detect_anomaly& operator=(const detect_anomaly&) = delete;

 private:
  bool previous_;
};

/// RAII: a label ("encoder", "layer1") for the ops recorded while it lives, reported by anomaly
/// mode; nested scopes join with '/'. Only kept while anomaly mode is on when the scope opens
/// (it costs nothing otherwise).
class AnomalyScope {
 public:
  explicit AnomalyScope(std::string label);
  ~AnomalyScope();
  AnomalyScope(const AnomalyScope&) = delete;
  AnomalyScope& operator=(const AnomalyScope&) = delete;

 private:
  bool pushed_ = false;
};

namespace tape {
/// Drops every node recorded on this thread. Tensors produced before the reset can no longer
/// be differentiated through (a backward reaching them throws). backward() already frees what
/// it walks, and empties the tape when nothing else is left on it, so a training loop that calls
/// backward() every step keeps a bounded tape; reset() is for forward passes without backward.
void reset();
/// Number of nodes currently held on this thread's tape.
std::size_t size();
/// For each of `leaves`, whether a backward from `root` could add to its gradient: false when no
/// path of recorded ops leads from `root` to it (an unused parameter). True does not promise a
/// gradient (an op may add none). One walk over the nodes below root; nothing is modified.
/// Data-parallel training uses it to treat unused parameters as ready before backward starts.
std::vector<bool> reachable(const Tensor& root, const std::vector<Tensor>& leaves);
}  // namespace tape

/// Which of an op's tensors its backward reads: its saved tensors, in PyTorch's terms. record()
/// remembers the version (Tensor::_version) of each one's buffer, and backward throws
/// std::runtime_error naming the op, the tensor and both versions when an in-place op changed it
/// in between, as PyTorch does ("one of the variables needed for gradient computation has been
/// modified by an inplace operation"). Name exactly what the closures read: inputs by their
/// position in record()'s list, and the output. A tensor the backward needs only the shape or
/// dtype of is not saved; an input whose value only another input's gradient needs is saved only
/// when that input requires grad (mul's b is read for a's gradient). record() without a Saves
/// argument saves every input and the output: safe (a change is never missed), but it also
/// rejects changes the op would not have noticed. docs/extending.md, "What an op saves".
class Saves {
 public:
  /// Nothing: the backward needs shapes only (add, sum, reshape, concat).
  static constexpr Saves none() { return Saves(0, false); }
  /// Inputs i, j, ... (pow(x, y): both).
  template <class... I> static constexpr Saves inputs(I... i) { return Saves((0u | ... | bit(static_cast<int>(i))), false); }
  /// The output (exp, tanh, sigmoid: the derivative is written in the result).
  static constexpr Saves output() { return Saves(0, true); }
  /// Every input and the output: what record() assumes for an op that does not say.
  static constexpr Saves all() { return Saves(~0u, true); }
  /// Also input i, when `when` (e.g. when the other input requires grad).
  constexpr Saves and_input(int i, bool when = true) const { return Saves(inputs_ | (when ? bit(i) : 0u), output_); }
  /// Also the output, when `when`.
  constexpr Saves and_output(bool when = true) const { return Saves(inputs_, output_ || when); }
  constexpr bool saves_input(std::size_t i) const { return (inputs_ >> (i < 31 ? i : 31)) & 1u; }
  constexpr bool saves_output() const { return output_; }
  constexpr bool empty() const { return inputs_ == 0 && !output_; }

 private:
  constexpr Saves(std::uint32_t inputs, bool output) : inputs_(inputs), output_(output) {}
  /// Bit 31 stands for input 31 and every later one.
  static constexpr std::uint32_t bit(int i) { return 1u << (i < 31 ? i : 31); }
  std::uint32_t inputs_;
  bool output_;
};

namespace detail {
/// Called by the first register_post_accumulate_grad_hook: from then on backward schedules them.
void enable_post_accumulate_hooks();
bool should_record(const Tensor* inputs, std::size_t n);
/// Appends a node for `output` (given fresh autograd state in place) that reads `saves` of its
/// tensors, and returns its closure slot.
BackwardFn& record_node(const char* name, Tensor& output, const Tensor* inputs, std::size_t n, Saves saves);
void run_backward(const Tensor& root, const Tensor& seed, bool retain_graph, bool create_graph = false);
}  // namespace detail

/// Options of tg::grad, as torch.autograd.grad's keywords.
struct GradOptions {
  /// Keep the graph for another backward; unset: the value of create_graph (as PyTorch).
  std::optional<bool> retain_graph{};
  /// Record the backward itself, so the returned gradients are differentiable (higher-order
  /// gradients). Every op on the way needs a differentiable backward; one without throws.
  bool create_graph = false;
  /// An input the outputs do not depend on gets an undefined gradient instead of an error.
  bool allow_unused = false;
};

/// The gradients of `outputs` with respect to `inputs` (each requiring grad: leaves or op
/// outputs), without touching any tensor's grad() (torch.autograd.grad). `grad_outputs` seeds each
/// output (may be empty, or hold undefined entries, for one-element outputs: ones). The graph is
/// freed unless `retain_graph`. An input the outputs do not depend on is an error unless
/// `allow_unused`, which returns an undefined tensor for it. Hooks of the inputs and of the op
/// outputs on the way run as in backward(). With create_graph the returned gradients are graph
/// tensors (they require grad where they depend on something that does), so gradients of them can
/// be taken: tg::grad(outputs, inputs, grad_outputs, {.create_graph = true}). An input listed twice
/// gets its gradient twice. Unlike torch, the walk covers every node below the outputs, not only
/// those on a path to the inputs: without retain_graph it frees them all, and the hooks of leaves
/// below the inputs run. A backward that throws (anomaly mode, a hook) can leave partial sums in
/// op outputs: call tape::reset() before walking that graph again.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, const GradOptions& options = {});

/// An op's backward closure: void(BackwardContext&).
template <class F>
concept BackwardClosure = std::is_invocable_v<std::decay_t<F>&, BackwardContext&>;

/// Records `output` as the result of op `name` applied to `inputs`, with its backward closure,
/// which reads `saves` of them (above). Returns `output`, now requiring grad, or unchanged when
/// nothing needs recording. Also for inputs[0, n) of any contiguous sequence (a TensorList, a
/// pooled vector) and for a std::vector.
template <BackwardClosure F>
Tensor record(const char* name, Tensor output, const Tensor* inputs, std::size_t n, Saves saves, F&& backward) {
  if (!detail::should_record(inputs, n)) return output;
  detail::record_node(name, output, inputs, n, saves).emplace(std::forward<F>(backward));
  return output;
}

template <BackwardClosure F>
Tensor record(const char* name, Tensor output, std::initializer_list<Tensor> inputs, Saves saves, F&& backward) {
  return record(name, std::move(output), inputs.begin(), inputs.size(), saves, std::forward<F>(backward));
}

template <BackwardClosure F>
Tensor record(const char* name, Tensor output, const std::vector<Tensor>& inputs, Saves saves, F&& backward) {
  return record(name, std::move(output), inputs.data(), inputs.size(), saves, std::forward<F>(backward));
}

/// record() with a differentiable backward `graph_backward` (void(GradGraphContext&)) beside the
/// kernel closure, used by backward with create_graph. It captures graph tensors (the op's inputs
/// as given, not detached) and nothing the kernel closure does not already keep alive.
template <BackwardClosure F, class G>
Tensor record(const char* name, Tensor output, const Tensor* inputs, std::size_t n, Saves saves, F&& backward,
              G&& graph_backward) {
  if (!detail::should_record(inputs, n)) return output;
  detail::record_node(name, output, inputs, n, saves)
      .emplace(detail::with_graph(std::forward<F>(backward), std::forward<G>(graph_backward)));
  return output;
}

template <BackwardClosure F, class G>
Tensor record(const char* name, Tensor output, std::initializer_list<Tensor> inputs, Saves saves, F&& backward,
              G&& graph_backward) {
  return record(name, std::move(output), inputs.begin(), inputs.size(), saves, std::forward<F>(backward),
                std::forward<G>(graph_backward));
}

template <BackwardClosure F, class G>
Tensor record(const char* name, Tensor output, const std::vector<Tensor>& inputs, Saves saves, F&& backward,
              G&& graph_backward) {
  return record(name, std::move(output), inputs.data(), inputs.size(), saves, std::forward<F>(backward),
                std::forward<G>(graph_backward));
}

// The same without `saves`: the op is taken to read every input and its output (Saves::all()).

template <BackwardClosure F>
Tensor record(const char* name, Tensor output, std::initializer_list<Tensor> inputs, F&& backward) {
  return record(name, std::move(output), inputs.begin(), inputs.size(), Saves::all(), std::forward<F>(backward));
}

template <BackwardClosure F>
Tensor record(const char* name, Tensor output, const std::vector<Tensor>& inputs, F&& backward) {
  return record(name, std::move(output), inputs.data(), inputs.size(), Saves::all(), std::forward<F>(backward));
}

template <BackwardClosure F>
Tensor record(const char* name, Tensor output, const Tensor* inputs, std::size_t n, F&& backward) {
  return record(name, std::move(output), inputs, n, Saves::all(), std::forward<F>(backward));
}

template <BackwardClosure F, class G>
Tensor record(const char* name, Tensor output, std::initializer_list<Tensor> inputs, F&& backward, G&& graph_backward) {
  return record(name, std::move(output), inputs.begin(), inputs.size(), Saves::all(), std::forward<F>(backward),
                std::forward<G>(graph_backward));
}

template <BackwardClosure F, class G>
Tensor record(const char* name, Tensor output, const std::vector<Tensor>& inputs, F&& backward, G&& graph_backward) {
  return record(name, std::move(output), inputs.data(), inputs.size(), Saves::all(), std::forward<F>(backward),
                std::forward<G>(graph_backward));
}

template <BackwardClosure F, class G>
Tensor record(const char* name, Tensor output, const Tensor* inputs, std::size_t n, F&& backward, G&& graph_backward) {
  return record(name, std::move(output), inputs, n, Saves::all(), std::forward<F>(backward),
                std::forward<G>(graph_backward));
}

}  // namespace tg
