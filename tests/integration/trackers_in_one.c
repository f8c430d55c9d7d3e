/*
 * trackers_in_one: several trackers in one process, through the one runner, for the
 * integration tests (test_trackers_in_one.py).
 *
 *   trackers_in_one TRACKER [OPTIONS] [-- TRACKER [OPTIONS]]...
 *   trackers_in_one --list
 *
 * Each tracker takes its own tool's options; the first one's -j, -e and -d decide
 * for the whole run (one sink, one duration). The trackers are those of trackers.h;
 * --list names them, one a line (bench/trackers.sh).
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "runner.h"
#include "sink.h"
#include "trackers.h"

static const struct tracker_ops *const known[] = { PYEBPF_TRACKERS(PYEBPF_TRACKER_ADDRESS) };

enum { MAX_TRACKERS = 8 };

static const struct tracker_ops *find(const char *name)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(known[i]->name, name))
			return known[i];
	return NULL;
}

/* argv[0] names the tracker, the rest are its options. */
static struct tracker *parse(int argc, char **argv, struct common_opts *common)
{
	const struct tracker_ops *ops = find(argv[0]);
	struct tool_doc doc = { .name = argv[0], .summary = "one of the trackers" };
	struct tracker *t;

	if (!ops) {
		fprintf(stderr, "trackers_in_one: no tracker '%s'\n", argv[0]);
		return NULL;
	}
	if (!(t = tracker_new(ops, common)))
		return NULL;
	if (tracker_parse_args(t, &doc, common, argc, argv)) {
		tracker_free(t);
		return NULL;
	}
	return t;
}

int main(int argc, char **argv)
{
	static struct common_opts common[MAX_TRACKERS];
	struct tracker *trackers[MAX_TRACKERS];
	struct sink *sink;
	int n = 0, rc = EXIT_USAGE;

	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			printf("%s\n", known[i]->name);
		return EXIT_OK;
	}
	for (int i = 1; i < argc && n < MAX_TRACKERS;) {
		int end = i;

		while (end < argc && strcmp(argv[end], "--"))
			end++;
		argv[end < argc ? end : argc] = NULL;
		if (!(trackers[n] = parse(end - i, argv + i, &common[n])))
			goto out;
		n++;
		i = end + 1;
	}
	log_progname = "trackers_in_one";
	if (!n) {
		fprintf(stderr, "usage: trackers_in_one TRACKER [OPTIONS] [-- TRACKER [OPTIONS]]... | --list\n");
		return EXIT_USAGE;
	}
	/* one sink and one clock: what a tracker prints depends on them (pystack -j: samples) */
	for (int i = 1; i < n; i++) {
		common[i].json = common[0].json;
		common[i].env = common[0].env;
		common[i].duration_s = common[0].duration_s;
	}
	sink = sink_stdout_open(common[0].json, common[0].env);
	rc = EXIT_RUNTIME;
	if (sink) {
		rc = runner_run(trackers, n, sink, &common[0]);
		if (sink_close(sink) && rc == EXIT_OK)
			rc = EXIT_RUNTIME;
	}
out:
	for (int i = 0; i < n; i++)
		tracker_free(trackers[i]);
	return rc;
}
