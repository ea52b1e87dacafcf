// Per-Session thread pool. Kernels never create threads: their bindings call parallel_for,
// which splits [0, n) over the pool that the calling thread has bound (Session.run binds its
// own), or runs inline when none is bound.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#include <atomic>

namespace msv0 {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs fn(task) for task in [0, tasks) on the workers and the caller; returns when all ran.
  // The caller and each worker not benched (see note_job) first run a contiguous block of
  // them, in thread order.
  void run(int64_t tasks, const std::function<void(int64_t)>& fn);
  // Solo: the caller runs every job itself, the workers left idle, split as for one thread
  // (bound_threads), which changes no result. Set between runs by the one caller that holds the
  // pool; the Session sets it where its runs measure faster so (see msv0.thread_choice).
  void set_solo(bool solo) { solo_ = solo; }
  bool solo() const { return solo_; }

 private:
  using Clock = std::chrono::steady_clock;

  void worker_loop(int self);
  void drain(int self);
  // Contention. A worker that the scheduler deschedules while it holds a task (another process
  // busy on its core) holds the caller until it runs again, a 4 ms tick here: several times a
  // small model's whole run, which made 2 threads slower than 1. A worker absent from many jobs
  // leaves the others running work split for more threads than run it. After a job that
  // started at `start`, whose caller had run its last task by `drained` and saw the workers
  // back at `end`: when such events recur for a worker, it is benched, taking no tasks (the
  // same tasks, dealt to the others, so results do not change) until its benched_until.
  void note_job(Clock::time_point start, Clock::time_point drained, Clock::time_point end);

  std::vector<std::thread> workers_;
  bool solo_ = false;
  std::mutex run_mu_;  // one run at a time (two Python threads may share a Session)
  std::mutex mu_;      // pairs with wake_ for workers that stopped spinning, and with bench_
  std::condition_variable wake_;
  std::condition_variable bench_;  // benched workers sleep on it; notified only on stop
  // Set under mu_; also read by spinning workers, so that a pool is destroyed without waiting
  // out a worker's spin.
  std::atomic<bool> stop_{false};
  // The current job. Written by run() only while no worker holds it (pending_ == 0), then
  // published by the release increment of generation_; a worker reads it after acquiring
  // generation_ and gives it back by decrementing pending_.
  const std::function<void(int64_t)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  // Tasks are dealt in contiguous blocks, one per thread (the caller is thread 0), so the same
  // thread touches the same part of consecutive layers' tensors and finds it in its own L2; a
  // thread that finishes its block takes tasks from the others'.
  struct alignas(64) Block {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
    // The last generation worker i joined or was excused from (set by whichever of the two
    // moves it from the generation before; unused for the caller's block 0).
    std::atomic<uint64_t> taken{0};
    // When worker i finished its share of the last generation it joined, and until when it is
    // benched (steady_clock counts): written by the worker and by the caller respectively.
    std::atomic<Clock::rep> finished{0};
    std::atomic<Clock::rep> benched_until{0};
  };
  std::vector<Block> blocks_;
  std::atomic<int> pending_{0};  // workers that have not finished the current generation
  // The caller's record of each worker (under run_mu_; [0], the caller's, unused).
  enum class Part { joined, excused, benched };
  struct Standing {
    Part part = Part::joined;      // in the current job
    int excused = 0;               // jobs of the current window it missed
    Clock::duration last_event{};  // threaded_ at its last event
    Clock::duration bench_for{};   // its last bench period; zero after an isolated event
  };
  std::vector<Standing> standing_;
  Clock::duration threaded_{};  // the caller's time running tasks of threaded jobs
  int window_jobs_ = 0;
};

ThreadPool* bound_pool();
void bind_pool(ThreadPool* pool);  // thread-local
// The threads that run a job of the bound pool: 1 without one, or where it runs solo. Kernels
// split their work by it; the splits change no result (a solo pool runs as one thread does).
int bound_threads();

// A buffer of at least `floats` floats owned by the calling thread, valid until its next call
// on this thread: kernels' per-task scratch (im2col rows, Winograd tiles), which as a fresh
// allocation per task would be mapped and page-faulted anew on every run.
float* thread_scratch(size_t floats);

// fn(begin, end) over chunks of [0, n); at least `grain` items per chunk.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// The grain for items of `work` multiply-adds (or element visits) each: a chunk of less than
// ~64K costs less than handing it to another thread (~2 us), so a small layer runs on one.
inline int64_t grain_for(int64_t work) {
  constexpr int64_t kMinChunkWork = 65536;
  return work >= kMinChunkWork ? 1 : kMinChunkWork / (work > 0 ? work : 1);
}

}  // namespace msv0
