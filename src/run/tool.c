#include "tool.h"

#include <stdlib.h>

#include "dbsinks.h"
#include "log.h"
#include "runner.h"
#include "sink.h"

int tool_main(const struct tool_doc *doc, const struct tracker_ops *ops, int argc, char **argv)
{
	struct sink_opts sinkopts = { 0 };
	struct common_opts common = { .sink = &sinkopts };
	struct tracker *t = tracker_new(ops, &common);
	struct sink *sink;
	int rc = EXIT_RUNTIME;

	if (!t)
		return EXIT_RUNTIME;
	if (tracker_parse_args(t, doc, &common, argc, argv)) {
		tracker_free(t);
		free(sinkopts.ch_password);
		return EXIT_USAGE;
	}
	sink = sinks_open(&common, &ops->schemas, 1);
	if (sink)
		rc = runner_run(&t, 1, sink, &common);
	/* results that could not be written make the run a failure */
	if (sink_close(sink) && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
	tracker_free(t);
	free(sinkopts.ch_password); /* --clickhouse-password's copy (sinkopts.c) */
	return rc;
}
