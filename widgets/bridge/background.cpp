#include "bridge/background.h"

#ifdef __linux__
#include <sys/resource.h>

#include <cerrno>
#endif

namespace ragwb {

void lowerToBackground([[maybe_unused]] int who) {
#ifdef __linux__
  const auto id = static_cast<id_t>(who);
  errno = 0;
  const int current = getpriority(PRIO_PROCESS, id);  // Linux: the nice value is per thread
  if (errno == 0 && current < kBackgroundNice) (void)setpriority(PRIO_PROCESS, id, kBackgroundNice);
#endif
}

void runBelowTheGuiThread() { lowerToBackground(0); }

}  // namespace ragwb
