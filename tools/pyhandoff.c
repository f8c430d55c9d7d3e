/*
 * pyhandoff: how long a request waits for a worker thread (gunicorn gthread) and in
 * the kernel's accept queue (uwsgi), from syscall tracepoints. The tracker is
 * src/trackers/pyhandoff.c.
 */
#include "tool.h"
#include "trackers.h"

static const struct tool_doc doc = {
	.name = "pyhandoff",
	.summary = "Trace how long requests wait for a worker thread (gunicorn gthread) and in the accept queue.",
	.examples = "  pyhandoff                       # every process on the host\n"
		    "  pyhandoff -p 4242 --children    # gunicorn master 4242 and its workers, also new ones\n"
		    "  pyhandoff -p 4243 --min-ms 10   # worker 4243, waits of 10 ms or more\n"
		    "  pyhandoff -p 4242 --children -j -e prod  # JSON lines tagged env=prod\n",
};

int main(int argc, char **argv)
{
	return tool_main(&doc, &pyhandoff_tracker, argc, argv);
}
