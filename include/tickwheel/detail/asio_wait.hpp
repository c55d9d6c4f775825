// tickwheel/detail/asio_wait.hpp — the machinery under tickwheel::asio::timer (tickwheel/asio.hpp):
// the context's driver slot, a wait's handler type-erased, and the driver's list of completed
// waits. Not part of the API.
#pragma once

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include <array>
#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace tickwheel::asio {
class ShardDriver;
}

namespace tickwheel::asio::detail {

// The ShardDriver of an io_context, where a timer constructed from the context finds it: a service
// of the context (one per context, created on first use), set and cleared by the driver.
class DriverSlot final : public boost::asio::execution_context::service {
 public:
  // How Asio finds a service of a context: by the address of this member. Its constructor does
  // nothing that can throw.
  static inline boost::asio::execution_context::id id;  // NOLINT(cert-err58-cpp)
  explicit DriverSlot(boost::asio::execution_context& context) : service(context) {}
  ShardDriver* driver = nullptr;

 private:
  void shutdown() override {}
};

// One async_wait of a timer: pending in the timer's list, then, completed with `ec`, in the
// driver's list of waits whose handlers are to run. run() takes the handler out, frees the op (in
// the timer's slot: marks the slot free; else by the handler's associated allocator, which made
// it), then calls handler(ec) through the handler's associated executor: dispatch() (at once when
// that is the context this thread runs, as Asio completes an operation) or post().
class WaitOp {
 public:
  WaitOp(const WaitOp&) = delete;
  WaitOp& operator=(const WaitOp&) = delete;
  WaitOp(WaitOp&&) = delete;
  WaitOp& operator=(WaitOp&&) = delete;

  enum class Via : bool { dispatch, post };
  template <class IoExecutor>
  void run(const IoExecutor& io, Via via) {
    run_(this, &io, via);
  }

  // The wait completed with `ec`: what its handler gets.
  void set_result(const boost::system::error_code& ec) noexcept { ec_ = ec; }
  const void* owner() const noexcept { return owner_; }  // the timer

 protected:
  using Run = void (*)(WaitOp* op, const void* io, Via via);
  WaitOp(Run run, const void* owner, bool* slot_busy) noexcept
      : owner_(owner), slot_busy_(slot_busy), run_(run) {}
  ~WaitOp() = default;
  const boost::system::error_code& result() const noexcept { return ec_; }
  bool* slot_busy() const noexcept { return slot_busy_; }

 private:
  friend struct WaitList;
  WaitOp* next_ = nullptr;
  boost::system::error_code ec_;
  const void* owner_;
  bool* slot_busy_;  // the timer's flag for the slot the op lives in; null if allocated
  Run run_;
};

// A FIFO of ops, linked through the ops themselves.
struct WaitList {
  WaitOp* head = nullptr;
  WaitOp* tail = nullptr;

  bool empty() const noexcept { return head == nullptr; }
  void push(WaitOp* op) noexcept {
    op->next_ = nullptr;
    (tail == nullptr ? head : tail->next_) = op;
    tail = op;
  }
  WaitOp* pop() noexcept {
    WaitOp* op = head;
    head = op->next_;
    if (head == nullptr) tail = nullptr;
    return op;
  }
  // Moves every op of `other` in front of this list's.
  void prepend(WaitList& other) noexcept {
    if (other.empty()) return;
    other.tail->next_ = head;
    if (tail == nullptr) tail = other.tail;
    head = other.head;
    other = WaitList();
  }
  // Unlinks the ops of `owner`, calling each(op) on each, in order.
  template <class Each>
  void remove_owned_by(const void* owner, Each&& each) {
    WaitList kept;
    while (!empty()) {
      WaitOp* op = pop();
      if (op->owner() == owner) {
        each(op);
      } else {
        kept.push(op);
      }
    }
    *this = kept;
  }
};

// One block of memory at a time, its owner's: what Asio allocates for the one handler a driver
// keeps posted to run completed waits (RunnerAllocator), so that the post costs no heap allocation.
// A second block at once, or a bigger one, comes from operator new. One thread at a time.
class OneBlock {
 public:
  void* take(std::size_t bytes) {
    if (!used_ && bytes <= block_.size()) {
      used_ = true;
      return block_.data();
    }
    return ::operator new(bytes);
  }
  void give(void* p) noexcept {
    if (p == block_.data()) {
      used_ = false;
    } else {
      ::operator delete(p);
    }
  }

 private:
  alignas(std::max_align_t) std::array<std::byte, 128> block_{};
  bool used_ = false;
};

template <class T>
class OneBlockAllocator {
 public:
  using value_type = T;
  explicit OneBlockAllocator(OneBlock& block) noexcept : block_(&block) {}
  // Implicit, as an allocator's rebinding copy is.
  template <class U>
  // NOLINTNEXTLINE(google-explicit-constructor,hicpp-explicit-conversions)
  OneBlockAllocator(const OneBlockAllocator<U>& other) noexcept : block_(other.block()) {}
  T* allocate(std::size_t n) { return static_cast<T*>(block_->take(n * sizeof(T))); }
  void deallocate(T* p, std::size_t /*n*/) noexcept { block_->give(p); }
  OneBlock* block() const noexcept { return block_; }
  template <class U>
  bool operator==(const OneBlockAllocator<U>& other) const noexcept {
    return block_ == other.block();
  }

 private:
  OneBlock* block_;
};

template <class Handler, class IoExecutor>
class WaitHandler final : public WaitOp {
 public:
  // The op for `handler`, placed in `slot` (its flag `busy` set) or, with a null slot, allocated by
  // the handler's associated allocator.
  template <class H>
  static WaitOp* make(H&& handler, const void* owner, void* slot, bool* busy) {
    // Placement news: the op is owned by the timer's and the driver's lists until run_op() ends it.
    if (slot != nullptr) {
      // NOLINTNEXTLINE(cppcoreguidelines-owning-memory)
      WaitOp* op = ::new (slot) WaitHandler(std::forward<H>(handler), owner, busy);
      *busy = true;
      return op;
    }
    OpAllocator alloc(boost::asio::get_associated_allocator(handler));
    WaitHandler* op = std::allocator_traits<OpAllocator>::allocate(alloc, 1);
    try {
      // NOLINTNEXTLINE(cppcoreguidelines-owning-memory)
      return ::new (static_cast<void*>(op)) WaitHandler(std::forward<H>(handler), owner, nullptr);
    } catch (...) {
      std::allocator_traits<OpAllocator>::deallocate(alloc, op, 1);
      throw;
    }
  }

 private:
  using OpAllocator = typename std::allocator_traits<
      boost::asio::associated_allocator_t<Handler>>::template rebind_alloc<WaitHandler>;

  // `busy` is cleared by run_op(), through the base.
  template <class H>
  WaitHandler(H&& handler, const void* owner, bool* busy)  // NOLINT(readability-non-const-parameter)
      : WaitOp(&WaitHandler::run_op, owner, busy), handler_(std::forward<H>(handler)) {}
  ~WaitHandler() = default;

  static void run_op(WaitOp* base, const void* io_ptr, Via via) {
    auto* self = static_cast<WaitHandler*>(base);
    Handler handler(std::move(self->handler_));
    const boost::system::error_code ec = self->result();
    if (bool* busy = self->slot_busy(); busy != nullptr) {
      self->~WaitHandler();
      *busy = false;
    } else {
      OpAllocator alloc(boost::asio::get_associated_allocator(handler));
      self->~WaitHandler();
      std::allocator_traits<OpAllocator>::deallocate(alloc, self, 1);
    }
    const auto executor =
        boost::asio::get_associated_executor(handler, *static_cast<const IoExecutor*>(io_ptr));
    auto call = [handler = std::move(handler), ec]() mutable { std::move(handler)(ec); };
    if (via == Via::post) {
      boost::asio::post(executor, std::move(call));
    } else {
      boost::asio::dispatch(executor, std::move(call));
    }
  }

  Handler handler_;
};

}  // namespace tickwheel::asio::detail
