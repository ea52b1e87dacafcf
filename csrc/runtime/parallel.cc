#include "runtime/parallel.h"

namespace msv0 {

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain(const std::function<void(int64_t)>& fn, int64_t tasks) {
  int64_t done = 0;
  for (int64_t t; (t = next_.fetch_add(1, std::memory_order_relaxed)) < tasks; ++done) fn(t);
  if (done) finished_.fetch_add(done, std::memory_order_acq_rel);
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly: consecutive layers post jobs microseconds apart, and a futex wake-up
    // costs more than a small layer's work.
    for (int i = 0; i < 20000 && generation_.load(std::memory_order_acquire) == seen; ++i)
      std::this_thread::yield();
    const std::function<void(int64_t)>* job;
    int64_t tasks;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
      if (stop_) return;
      seen = generation_.load();
      job = job_;
      tasks = tasks_;
      ++active_;
    }
    drain(*job, tasks);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --active_;
    }
    done_.notify_all();
  }
}

void ThreadPool::run(int64_t tasks, const std::function<void(int64_t)>& fn) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return active_ == 0; });
    job_ = &fn;
    tasks_ = tasks;
    next_.store(0);
    finished_.store(0);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drain(fn, tasks);
  // Wait for the other chunks; spinning is cheaper than sleeping for the few microseconds
  // a balanced split leaves.
  while (finished_.load(std::memory_order_acquire) < tasks) std::this_thread::yield();
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return active_ == 0; });
}

namespace {
thread_local ThreadPool* t_pool = nullptr;
}

ThreadPool* bound_pool() { return t_pool; }
void bind_pool(ThreadPool* pool) { t_pool = pool; }

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
