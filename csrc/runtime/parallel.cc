#include "runtime/parallel.h"
#include <algorithm>

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

// Polls done() with pause hints for about kPauses rounds, then with sched_yield (which lets a
// descheduled peer run when cores are shared) for kYields more; returns whether done() held.
// Consecutive layers post jobs microseconds apart, and both a futex wake-up and a yield cost
// more than a small layer's work, so the fast path is a pure spin.
template <class Done>
bool spin_until(Done done, int pauses, int yields) {
  for (int i = 0; i < pauses; ++i) {
    if (done()) return true;
    cpu_relax();
  }
  for (int i = 0; i < yields; ++i) {
    if (done()) return true;
    std::this_thread::yield();
  }
  return done();
}

// A worker polls ~0.1 ms with pauses, then ~1.5 ms with yields (~70 ns each when its core is
// otherwise idle), then sleeps. Measured on a 2-vCPU Zen 4, 2 threads: with no polling the
// worker missed every job of iris_landmark (1.22 ms a run, as at 1 thread; 0.72 with 500 pauses
// or more); ocr_rec (NumPy steps between native ones) run 30 times a second took 15.6 ms with
// 2000 yields against 8.6 with 20000. Polling longer costs CPU between runs: at 30 runs a
// second, 3.1 ms of CPU a run for iris_landmark with these (1.8 without yields), 35 ms with
// 200 000 yields (which would cut its 1.55 ms latency to 1.0).
constexpr int kPauses = 4000, kYields = 20000;

// A worker that finishes a job more than kMinStall, and more than the caller's own running time,
// after the caller ran out of tasks has stalled: descheduled, not slowed by an uneven split (with
// a few chunks per thread and stealing, a worker finishes at most about one chunk after the
// caller). A worker that had not joined a job by the time every task was taken missed it;
// missing more than a quarter of a window of kWindow jobs is an event too (a worker woken from
// sleep misses a run's first few jobs, not a quarter). A worker's events that recur within
// kRecur of threaded work bench it for kMinBench, doubling up to kMaxBench while they keep
// recurring: threads pay (a 2-thread job takes ~0.6 of a 1-thread one) only if 4 ms stalls are
// rarer than one per ~10 ms. With a busy process on the worker's core here, they came every
// 5-8 ms of threaded jobs for 1 ms models (iris_landmark) and every 10-500 ms for MobileNetV2,
// whose 2 threads still beat 1.
constexpr std::chrono::microseconds kMinStall{250};
constexpr int kWindow = 32;
constexpr std::chrono::milliseconds kRecur{25}, kMinBench{5}, kMaxBench{1000};

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : blocks_(num_threads < 1 ? 1 : num_threads), standing_(num_threads < 1 ? 1 : num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_relaxed);
  }
  wake_.notify_all();
  bench_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain(int self) {
  const std::function<void(int64_t)>& fn = *job_;
  const int n = static_cast<int>(blocks_.size());
  for (int i = 0; i < n; ++i) {
    Block& b = blocks_[(self + i) % n];
    for (int64_t t; (t = b.next.fetch_add(1, std::memory_order_relaxed)) < b.end;) fn(t);
  }
}

void ThreadPool::worker_loop(int self) {
  uint64_t seen = 0;
  for (;;) {
    auto posted = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    auto posted_or_stop = [&] { return stop_.load(std::memory_order_relaxed) || posted(); };
    if (!spin_until(posted_or_stop, kPauses, kYields)) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, posted_or_stop);
    }
    if (stop_.load(std::memory_order_relaxed)) return;
    seen = generation_.load(std::memory_order_acquire);
    // Join generation `seen`, unless the caller has already excused this worker from it.
    uint64_t previous = seen - 1;
    Block& b = blocks_[self];
    if (b.taken.compare_exchange_strong(previous, seen, std::memory_order_acq_rel)) {
      drain(self);
      b.finished.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    } else if (const Clock::rep until = b.benched_until.load(std::memory_order_relaxed);
               until > Clock::now().time_since_epoch().count()) {
      // Benched: sleep it out rather than poll every job posted meanwhile on a contended core.
      std::unique_lock<std::mutex> lock(mu_);
      bench_.wait_until(lock, Clock::time_point(Clock::duration(until)),
                        [&] { return stop_.load(std::memory_order_relaxed); });
    }
  }
}

void ThreadPool::run(int64_t tasks, const std::function<void(int64_t)>& fn) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  std::lock_guard<std::mutex> serial(run_mu_);
  const Clock::time_point start = Clock::now();
  const int n = static_cast<int>(blocks_.size());
  int threads = 1;
  for (int i = 1; i < n; ++i) {
    const bool benched = blocks_[i].benched_until.load(std::memory_order_relaxed) > start.time_since_epoch().count();
    standing_[i].part = benched ? Part::benched : Part::joined;
    threads += !benched;
  }
  if (threads == 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  // Every worker gave the previous job back before the previous run returned.
  job_ = &fn;
  const uint64_t generation = generation_.load(std::memory_order_relaxed) + 1;
  for (int i = 0, k = 0; i < n; ++i) {
    Block& b = blocks_[i];
    if (standing_[i].part == Part::benched) {
      b.taken.store(generation, std::memory_order_relaxed);  // excused from it up front
      b.next.store(0, std::memory_order_relaxed);
      b.end = 0;
      continue;
    }
    b.next.store(k * tasks / threads, std::memory_order_relaxed);
    b.end = (k + 1) * tasks / threads;
    ++k;
  }
  pending_.store(threads - 1, std::memory_order_relaxed);
  {
    // Under mu_ so that a worker about to sleep sees either the new generation or the notify.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drain(0);
  const Clock::time_point drained = Clock::now();
  // Every task has been taken. A worker that has not joined this generation yet (descheduled
  // while another process holds its core) is excused from it, so the caller does not wait a
  // scheduler slice for it; it will never read this job_. The workers that joined are waited
  // for, so job_ can be rewritten safely once they all have checked in.
  for (int i = 1; i < n; ++i) {
    uint64_t previous = generation - 1;
    if (standing_[i].part == Part::joined &&
        blocks_[i].taken.compare_exchange_strong(previous, generation, std::memory_order_acq_rel)) {
      pending_.fetch_sub(1, std::memory_order_acq_rel);
      standing_[i].part = Part::excused;
    }
  }
  auto all_back = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  while (!spin_until(all_back, kPauses, 1 << 30)) {
  }
  note_job(start, drained, Clock::now());
}

void ThreadPool::note_job(Clock::time_point start, Clock::time_point drained, Clock::time_point end) {
  threaded_ += drained - start;
  const bool window_done = ++window_jobs_ == kWindow;
  if (window_done) window_jobs_ = 0;
  const Clock::rep stall = (drained + std::max<Clock::duration>(drained - start, kMinStall)).time_since_epoch().count();
  for (size_t i = 1; i < blocks_.size(); ++i) {
    Standing& s = standing_[i];
    bool event = s.part == Part::joined && blocks_[i].finished.load(std::memory_order_relaxed) > stall;
    s.excused += s.part == Part::excused;
    if (window_done) {
      event |= s.excused * 4 > kWindow;
      s.excused = 0;
    }
    if (!event) continue;
    const bool recurred = threaded_ - s.last_event < kRecur;
    s.last_event = threaded_;
    if (!recurred) {
      s.bench_for = Clock::duration::zero();
      continue;
    }
    s.bench_for = std::clamp<Clock::duration>(2 * s.bench_for, kMinBench, kMaxBench);
    blocks_[i].benched_until.store((end + s.bench_for).time_since_epoch().count(), std::memory_order_relaxed);
  }
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

int bound_threads() {
  const ThreadPool* pool = bound_pool();
  return pool && !pool->solo() ? pool->size() : 1;
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int threads = bound_threads();
  if (grain < 1) grain = 1;
  const int64_t units = (n + grain - 1) / grain;
  // A few chunks per thread balance uneven work without paying much per chunk, and as many per
  // thread, of sizes within one element of each other, balance even work: 14 tiles in 7 chunks
  // of 2 left one of 2 threads 4 of them (ResNet-50's int8 56x56 convs ran 1.75x faster, not
  // 2x), and boundaries on whole grains left the last chunk of a small job nearly empty.
  int64_t chunks = units < 4 * threads ? units : 4 * threads;
  if (chunks > threads) chunks -= chunks % threads;
  if (threads == 1 || chunks <= 1) {
    fn(0, n);
    return;
  }
  bound_pool()->run(chunks, [&](int64_t t) { fn(t * n / chunks, (t + 1) * n / chunks); });
}

}  // namespace msv0
