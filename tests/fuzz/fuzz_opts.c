/*
 * Command lines (src/base/opts.c, src/run/sinkopts.c and every tracker's own option
 * handler and check): what a user or a wrapping script may type. The input is one
 * byte choosing the tracker, then its arguments separated by NUL bytes. -h and -V
 * are left out of the tables (they print and exit). Options may create their files
 * (-o): the harness works in a directory of its own and skips an input with a '/' in
 * an argument other than a URL ("http..." is a relative path under a directory
 * "http:" that does not exist), so nothing outside it is written (an early version
 * truncated files named by mutated paths, as root).
 */
#include "fuzz.h"

#include <ftw.h>
#include <sys/stat.h>

#include "opts.h"
#include "sinkopts.h"
#include "trackers.h"

static const struct tracker_ops *const trackers[] = { PYEBPF_TRACKERS(PYEBPF_TRACKER_ADDRESS) };
#define NTRACKERS (sizeof(trackers) / sizeof(trackers[0]))
#define MAX_ARGS 64

static char dir[] = "/tmp/pyebpf-fuzz-opts-XXXXXX";

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path) && 0;
}

/* The directory and what the options made in it go at exit. */
static void remove_dir(void)
{
	nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	if (!mkdtemp(dir) || chdir(dir))
		abort();
	atexit(remove_dir);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct tool_doc doc = { .name = "fuzz", .summary = "fuzz" };
	static struct opt table[128];
	struct tracker_ops ops;
	struct common_opts common = { 0 };
	struct sink_opts sink = { 0 };
	struct tracker *t;
	char *argv[MAX_ARGS + 2], *args;
	int argc = 1, n = 0;

	if (!size)
		return 0;
	ops = *trackers[data[0] % NTRACKERS];
	for (const struct opt *o = ops.options; o->name && n < 127; o++)
		if (o->id != OPT_HELP && o->id != OPT_VERSION)
			table[n++] = *o;
	table[n] = (struct opt)OPT_END;
	ops.options = table;
	args = fuzz_string(data + 1, size - 1);
	if (!args)
		return 0;
	argv[0] = "fuzz";
	/* every NUL ends an argument; the last one ends at the string's own */
	for (size_t at = 0; at < size - 1 && argc < MAX_ARGS; at += strlen(args + at) + 1)
		argv[argc++] = args + at;
	argv[argc] = NULL;
	for (int i = 1; i < argc; i++)
		if (strchr(argv[i], '/') && strncmp(argv[i], "http", 4)) {
			free(args);
			return 0;
		}
	common.sink = &sink;
	t = tracker_new(&ops, &common);
	if (t) {
		tracker_parse_args(t, &doc, &common, argc, argv);
		tracker_free(t);
	}
	free(sink.ch_password);
	free(args);
	return 0;
}
