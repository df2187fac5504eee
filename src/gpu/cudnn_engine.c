/* The engine choice of cudnn_util.h.  Plain C with no cuDNN call, so that
 * the test knob links in CPU-only builds too. */
#include "core/log.h"
#include "gpu/cudnn_util.h"

static bool g_enabled = true;

void ct_cudnn_set_enabled(bool enabled) { g_enabled = enabled; }

bool ct_cudnn_wanted(const char *name, int engine, const char *unsupported) {
  if (!g_enabled || engine == CT_ENGINE_CAFFE) return false;
  if (!unsupported) return true;
  if (engine == CT_ENGINE_CUDNN)
    LOG_WARNING("layer '%s': engine CUDNN cannot compute this layer exactly (%s); using the "
                "CAFFE engine",
                name, unsupported);
  return false;
}
