#include "runtime/parallel.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <stdexcept>

namespace msv0 {
namespace {

// A spin-wait hint: lets the sibling hyperthread run and saves power while polling.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

using Clock = std::chrono::steady_clock;

// Polls done() with pause hints for up to `spin`; returns whether done() held.
template <class Done>
bool spin_until(Done done, Clock::duration spin) {
  if (done()) return true;
  const Clock::time_point until = Clock::now() + spin;
  do {
    for (int i = 0; i < 16; ++i) {  // a clock read per 16 pauses (≈ 0.1–2 µs by core)
      if (done()) return true;
      cpu_relax();
    }
  } while (Clock::now() < until);
  return done();
}

int env_spin_us() {
  const char* env = std::getenv("MSV0_SPIN_US");
  if (!env || !*env) return ThreadPool::kDefaultSpinUs;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end || v < 0 || v > 1000000) throw std::invalid_argument("MSV0_SPIN_US must be an integer in [0, 1000000]");
  return static_cast<int>(v);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, int spin_us)
    : spin_us_(spin_us < 0 ? env_spin_us() : spin_us), blocks_(num_threads < 1 ? 1 : num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

int64_t ThreadPool::drain(int self) {
  const std::function<void(int64_t)>& fn = *job_;
  const int n = static_cast<int>(blocks_.size());
  int64_t ran = 0;
  for (int i = 0; i < n; ++i) {
    Block& b = blocks_[(self + i) % n];
    for (int64_t t; (t = b.next.fetch_add(1, std::memory_order_relaxed)) < b.end; ++ran) fn(t);
  }
  return ran;
}

void ThreadPool::worker_loop(int self) {
  const auto spin = std::chrono::microseconds(spin_us_);
  uint64_t seen = 0;
  for (;;) {
    auto posted = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(posted, spin)) {
      std::unique_lock<std::mutex> lock(mu_);
      ++sleeping_;
      wake_.wait(lock, [&] { return stop_ || posted(); });
      --sleeping_;
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    // Join generation `seen`, unless the caller has already excused this worker from it.
    uint64_t previous = seen - 1;
    if (blocks_[self].taken.compare_exchange_strong(previous, seen, std::memory_order_acq_rel)) {
      drain(self);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller may have stopped spinning
        done_.notify_one();
      }
    }
  }
}

// Posts the job, runs the caller's share and waits for the workers that joined; returns
// whether the job was contended: it took at least as long as the caller alone would have,
// reckoning each task at the caller's mean (the wake-up it posted counts as its work).
bool ThreadPool::post_and_drain(int64_t tasks, const std::function<void(int64_t)>& fn) {
  // Every worker gave the previous job back before the previous run returned.
  job_ = &fn;
  const int64_t n = static_cast<int64_t>(blocks_.size());
  for (int64_t i = 0; i < n; ++i) {
    blocks_[i].next.store(i * tasks / n, std::memory_order_relaxed);
    blocks_[i].end = (i + 1) * tasks / n;
  }
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  const Clock::time_point start = Clock::now();
  bool asleep;
  {
    // Under mu_ so that a worker about to sleep sees either the new generation or the notify.
    std::lock_guard<std::mutex> lock(mu_);
    asleep = sleeping_ > 0;
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (asleep) wake_.notify_all();
  const int64_t mine = drain(0);
  const Clock::time_point drained = Clock::now();
  // Every task has been taken. A worker that has not joined this generation yet (asleep, or
  // descheduled while another process holds its core) is excused from it, so the caller does
  // not wait a wake-up or a scheduler slice for it; it will never read this job_. The workers
  // that joined are waited for, so job_ can be rewritten safely once they all have checked in.
  const uint64_t generation = generation_.load(std::memory_order_relaxed);
  for (int64_t i = 1; i < n; ++i) {
    uint64_t previous = generation - 1;
    if (blocks_[i].taken.compare_exchange_strong(previous, generation, std::memory_order_acq_rel))
      pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
  auto all_back = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(all_back, std::chrono::microseconds(spin_us_))) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, all_back);
  }
  const auto own = (drained - start).count(), waited = (Clock::now() - drained).count();
  return mine == tasks || waited * mine >= own * (tasks - mine);
}

void ThreadPool::run(int64_t tasks, const std::function<void(int64_t)>& fn) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  std::lock_guard<std::mutex> serial(run_mu_);
  if (serial_left_ > 0) {
    --serial_left_;
    ++stats_.serial;
    for (int64_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  ++stats_.parallel;
  if (post_and_drain(tasks, fn)) {
    ++stats_.contended;
    backoff_ = std::min(std::max(2 * backoff_, 1u), kMaxBackoff);
    serial_left_ = backoff_;
  } else {
    backoff_ /= 2;  // contention comes and goes: forget it gradually
  }
}

ThreadPool::Stats ThreadPool::stats() const {
  std::lock_guard<std::mutex> serial(run_mu_);
  return stats_;
}

namespace {
thread_local ThreadPool* t_pool = nullptr;
}

ThreadPool* bound_pool() { return t_pool; }
void bind_pool(ThreadPool* pool) { t_pool = pool; }

float* thread_scratch(size_t floats) {
  // 64-byte aligned (a large vector's data sits 16 bytes past a page), so whole-vector
  // accesses to the scratch never straddle two cache lines.
  constexpr size_t kAlign = 64 / sizeof(float);
  thread_local std::vector<float> scratch;
  if (scratch.size() < floats + kAlign) scratch.resize(floats + kAlign);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(scratch.data());
  return scratch.data() + (64 - addr % 64) % 64 / sizeof(float);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  ThreadPool* pool = bound_pool();
  const int threads = pool ? pool->size() : 1;
  if (grain < 1) grain = 1;
  int64_t chunks = (n + grain - 1) / grain;
  // A few chunks per thread balance uneven work without paying much per chunk.
  if (chunks > 4 * threads) chunks = 4 * threads;
  if (threads == 1 || chunks <= 1) {
    fn(0, n);
    return;
  }
  const int64_t step = (n + chunks - 1) / chunks;
  chunks = (n + step - 1) / step;
  pool->run(chunks, [&](int64_t t) { fn(t * step, t * step + step < n ? t * step + step : n); });
}

}  // namespace msv0
