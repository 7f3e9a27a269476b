#include "bridge/background.h"

#ifdef __linux__
#include <sys/resource.h>

#include <cerrno>
#endif

namespace ragwb {

void runBelowTheGuiThread() {
#ifdef __linux__
  errno = 0;
  const int current = getpriority(PRIO_PROCESS, 0);  // Linux: the calling thread's own value
  if (errno == 0 && current < kBackgroundNice) (void)setpriority(PRIO_PROCESS, 0, kBackgroundNice);
#endif
}

}  // namespace ragwb
