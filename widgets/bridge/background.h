// Work off the GUI thread that must not compete with it for a core.
//
// On Linux the nice value is a thread's own and a new thread inherits its creator's. The engine's
// threads are lowered where they start (the bridge's loader and driver threads); Qt's global pool
// is started from the GUI thread, so its threads would run at the GUI thread's priority. Under
// Xvfb on two cores, `perf sched timehist` caught the pool thread of a knowledge-graph layout
// preempting the GUI thread for 3.7 ms in the middle of a scene update while a nice-10 engine
// worker kept the other core. Every background task of the workbench therefore goes through
// runInBackground(), which lowers the pool thread it lands on before it starts. A pool thread,
// once lowered, stays lowered: every task on Qt's global pool in this application is background
// work.
//
//   m_watcher.setFuture(ragwb::runInBackground(&layOutKnowledgeGraph, layoutInput()));
#pragma once

#include <QtConcurrent/QtConcurrentRun>
#include <functional>
#include <thread>
#include <utility>

namespace ragwb {

// The nice value of the engine's and the background's threads (the GUI thread keeps its own).
inline constexpr int kBackgroundNice = 10;

// Lowers the calling thread to kBackgroundNice, never raising it; the threads and processes it
// starts afterwards inherit the value (the Reproduce page spawns its bench from a thread lowered
// this way). A function, for hooks such as WindVeParams::onWorkerStart. A no-op off Linux.
void runBelowTheGuiThread();

// QtConcurrent::run on Qt's global pool, at background priority. Arguments are copied (decayed)
// into the task, as QtConcurrent::run does. A future waited on (QFuture::result,
// waitForFinished) before a pool thread has taken its task runs the task on the waiting thread;
// that thread, the one that asked for the work, keeps its priority.
template <class F, class... Args>
auto runInBackground(F&& f, Args&&... args) {
  return QtConcurrent::run(
      [caller = std::this_thread::get_id(), f = std::forward<F>(f), ... args = std::forward<Args>(args)]() mutable {
        if (std::this_thread::get_id() != caller) runBelowTheGuiThread();
        return std::invoke(std::move(f), std::move(args)...);
      });
}

}  // namespace ragwb
