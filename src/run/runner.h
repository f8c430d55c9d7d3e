/*
 * The one event loop: compiles and starts every tracker, polls all their buffers
 * together, ends the run on a signal, the duration, a broken stdout or when every
 * tracker's targets are gone, then drains, and lets each finish.
 */
#ifndef PYEBPF_RUNNER_H
#define PYEBPF_RUNNER_H

#include "tracker.h"

/*
 * Runs trackers (prepared by their options) to the end; --ebpf prints their text
 * instead. Returns the tool's exit code.
 */
int runner_run(struct tracker *const *trackers, int n, const struct common_opts *common);
/*
 * The same for a run of several independent trackers (pymonitor): one that cannot
 * inspect its targets, compile or attach is a warning naming it, and the others run
 * (1 when none can). The caller still frees every tracker.
 */
int runner_run_each(struct tracker *const *trackers, int n, const struct common_opts *common);

#endif
