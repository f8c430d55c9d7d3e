/* The main of a tool that runs one tracker: options, then the runner. */
#ifndef PYEBPF_TOOL_H
#define PYEBPF_TOOL_H

#include "opts.h"
#include "tracker.h"

/* Runs the tracker ops with the options of argv; returns the exit code. */
int tool_main(const struct tool_doc *doc, const struct tracker_ops *ops, int argc, char **argv);

#endif
