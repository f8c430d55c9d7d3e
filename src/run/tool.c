#include "tool.h"

#include "dbsinks.h"
#include "log.h"
#include "runner.h"
#include "sink.h"

int tool_main(const struct tool_doc *doc, const struct tracker_ops *ops, int argc, char **argv)
{
	struct common_opts common = { 0 };
	struct tracker *t = tracker_new(ops, &common);
	int rc = EXIT_RUNTIME;

	if (!t)
		return EXIT_RUNTIME;
	if (tracker_parse_args(t, doc, &common, argc, argv)) {
		tracker_free(t);
		return EXIT_USAGE;
	}
	t->sink = sinks_open(&common, &ops->schemas, 1);
	if (t->sink)
		rc = runner_run(&t, 1, &common);
	/* results that could not be written make the run a failure */
	if (sink_close(t->sink) && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	t->sink = NULL;
	tracker_free(t);
	return rc;
}
