// parallel_for over [0, n) on the host's cores: the fp64 reference and the CPU models are the
// slow part of a check, and every row is independent.
// SlowRunNotice: a progress line while a slow host computation runs, so that a long CPU run is
// seen to work, not taken for a hang.
// run_team and Barrier: a CPU model's team of threads that share one piece of work and meet at
// barriers, as a GPU block's threads do at __syncthreads(), so that code written for a team of
// many (each member its share, a reduction across members) is run by many on the CPU too.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lab {
template <class Fn>
void parallel_for(int64_t n, Fn fn) {
  const int64_t workers = std::min<int64_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  if (workers <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w)
    pool.emplace_back([=, &fn] {
      for (int64_t i = w; i < n; i += workers) fn(i);  // interleaved: causal rows differ in cost
    });
  for (auto& t : pool) t.join();
}

namespace detail {
// The team (run_team) the calling thread is a member of: its size, and how many members have
// returned from their body. nullptr on a thread outside a team.
struct TeamExits {
  int members;
  std::atomic<int> returned{0};
};
inline thread_local TeamExits* current_team = nullptr;
}  // namespace detail

// A barrier for `members` threads, reusable at once (C++17 has no std::barrier). When not every
// member arrives (code that calls a team's reduction from some members only), arrive_and_wait()
// returns false, and the caller reports it instead of hanging. Among the members of a run_team of
// that size, that is decided exactly and at once: a member still computing may take as long as it
// needs (a big shape on a slow CPU), but once every member not waiting here has returned from its
// body, nobody is left to arrive. A time limit would have to choose between failing a slow correct
// run and making every wrong one wait it out. Outside such a team, a wait that outlasts `patience`
// is taken for a member that never arrives.
class Barrier {
 public:
  explicit Barrier(int members, std::chrono::milliseconds patience = std::chrono::seconds(5))
      : members_(members), patience_(patience) {}
  bool arrive_and_wait() {
    detail::TeamExits* team = detail::current_team;
    if (team && team->members != members_) team = nullptr;  // a barrier of part of the team: no way to tell
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_) return false;
    const uint64_t generation = generation_;
    if (++arrived_ == members_) {  // the last to arrive releases this generation
      arrived_ = 0;
      ++generation_;
      all_arrived_.notify_all();
      return true;
    }
    const auto released = [&] { return generation_ != generation || broken_; };
    const auto start = std::chrono::steady_clock::now();
    // A member that returns cannot wake this wait (it knows no barrier): the wait looks again
    // every few milliseconds, which costs nothing beside a correct team's microsecond waits.
    while (!all_arrived_.wait_for(lock, std::chrono::milliseconds(2), released)) {
      const bool nobody_left = team && arrived_ + team->returned.load() >= members_;
      if (nobody_left || (!team && std::chrono::steady_clock::now() - start > patience_)) {
        broken_ = true;  // release every other waiter too: the team cannot go on
        all_arrived_.notify_all();
        return false;
      }
    }
    return !broken_;
  }

 private:
  std::mutex mu_;
  std::condition_variable all_arrived_;
  const int members_;
  const std::chrono::milliseconds patience_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
};

// Runs body(member) for member = 0 .. members - 1, each on its own thread, all at once (they may
// meet at a Barrier), and returns when every one has returned.
template <class Fn>
void run_team(int members, Fn body) {
  detail::TeamExits exits{members};
  std::vector<std::thread> team;
  for (int m = 0; m < members; ++m)
    team.emplace_back([m, &body, &exits] {
      detail::current_team = &exits;
      body(m);
      detail::current_team = nullptr;
      ++exits.returned;
    });
  for (auto& t : team) t.join();
}

// Nothing for a run shorter than `first`, then a line on `out` every `every` with the time so far
// (a CPU model of a long sequence takes tens of seconds on a laptop's cores); it stops, at once,
// when it goes out of scope. `on` false (a --quiet run): no line, no thread.
class SlowRunNotice {
 public:
  SlowRunNotice(bool on, std::string what, std::string hint, std::chrono::milliseconds first = std::chrono::seconds(5),
                std::chrono::milliseconds every = std::chrono::seconds(10), std::FILE* out = stderr) {
    if (!on) return;
    ticker_ = std::thread([this, what, hint, first, every, out] {
      const auto start = std::chrono::steady_clock::now();
      auto next = start + first;
      std::unique_lock<std::mutex> lock(mu_);
      while (!stop_cv_.wait_until(lock, next, [&] { return stopped_; })) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(out, "  ... %s still running: %.0f s%s%s\n", what.c_str(), s, hint.empty() ? "" : " (",
                     hint.empty() ? "" : (hint + ")").c_str());
        std::fflush(out);
        next += every;
      }
    });
  }
  ~SlowRunNotice() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
    }
    stop_cv_.notify_all();
    if (ticker_.joinable()) ticker_.join();
  }
  SlowRunNotice(const SlowRunNotice&) = delete;
  SlowRunNotice& operator=(const SlowRunNotice&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopped_ = false;
  std::thread ticker_;  // none when off
};
}  // namespace lab
