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
 * instead. Returns the tool's exit code. sink is the run's one sink: every tracker's
 * records go there (the runner sets each one's sink for the run, NULL again after);
 * the runner flushes it after every poll and ends the run when it fails or its
 * reader goes away. The caller opens it and closes it after.
 */
int runner_run(struct tracker *const *trackers, int n, struct sink *sink, const struct common_opts *common);
/*
 * The same for a run of several independent trackers (pymonitor): one that cannot
 * inspect its targets, compile or attach is a warning naming it, and the others run
 * (1 when none can). The caller still frees every tracker.
 */
int runner_run_each(struct tracker *const *trackers, int n, struct sink *sink,
		    const struct common_opts *common);

#endif
