#include "monitor.h"

#include <stdlib.h>
#include <string.h>

#include "dbsinks.h"
#include "log.h"
#include "runner.h"

#define MAX_ENTRIES 16
#define MAX_FLAG_OPTS 48
#define MAX_ARGS 256
#define MAX_SCHEMAS 64

enum { OPT_ENABLE = OPT_TOOL_BASE, OPT_ALL, OPT_CHILDREN, OPT_FLAG_BASE };

struct given {
	int entry, flag;
	const char *arg;
};

/* One --enable word: an entry of a tracker's monitor list, and the tracker. */
struct slot {
	const struct monitor_entry *e;
	const struct tracker_ops *ops;
};

struct monitor {
	struct slot entries[MAX_ENTRIES];
	int n;
	bool enabled[MAX_ENTRIES], any_enabled, all, children;
	struct given given[MAX_FLAG_OPTS];
	int ngiven;
	int flag_entry[MAX_FLAG_OPTS], flag_index[MAX_FLAG_OPTS]; /* by id - OPT_FLAG_BASE */
	struct sink_opts *sink; /* the run's, as in its common_opts */
};

static int find_entry(const struct monitor *m, const char *name)
{
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->entries[i].e->name, name))
			return i;
	return -1;
}

/* --enable gc,py_stack or --enable "gc py_stack" (the words are joined with commas). */
static int enable(struct monitor *m, const char *list)
{
	char buf[512], *tok, *save = NULL;

	if (strlen(list) >= sizeof(buf))
		return opts_usage_error("invalid --enable '%s': too long", list);
	strcpy(buf, list);
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		int i = find_entry(m, tok);
		if (i < 0) {
			char names[256] = "";
			for (int k = 0; k < m->n; k++)
				snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", k ? " " : "",
					 m->entries[k].e->name);
			return opts_usage_error("invalid --enable '%s': no tracker '%s' (known: %s)", list, tok, names);
		}
		m->enabled[i] = m->any_enabled = true;
	}
	return 0;
}

static int on_option(int id, const char *arg, void *ctx)
{
	struct monitor *m = ctx;
	/* arg is argv's own memory (getopt's optarg): a password in it is blanked */
	int r = sinkopts_handle(m->sink, id, (char *)arg);

	if (r)
		return r < 0 ? -1 : 0;
	if (id == OPT_ENABLE)
		return enable(m, arg);
	if (id == OPT_ALL) {
		m->all = true;
		return 0;
	}
	if (id == OPT_CHILDREN) {
		m->children = true;
		return 0;
	}
	if (id >= OPT_FLAG_BASE && id < OPT_FLAG_BASE + MAX_FLAG_OPTS && m->ngiven < MAX_FLAG_OPTS) {
		m->given[m->ngiven++] = (struct given){ m->flag_entry[id - OPT_FLAG_BASE],
							m->flag_index[id - OPT_FLAG_BASE], arg };
		return 0;
	}
	return -1;
}

/*
 * The original monitor's `-p 1 2 3` and `--enable gc py_stack`: the words after them
 * up to the next option become one comma list (pymonitor takes no operands).
 */
static int join_lists(int argc, char **argv, char **out, char *store, size_t cap)
{
	int n = 0;
	size_t used = 0;

	for (int i = 0; i < argc && n < MAX_ARGS - 1; i++) {
		bool list = !strcmp(argv[i], "-p") || !strcmp(argv[i], "--pid") || !strcmp(argv[i], "--enable");
		out[n++] = argv[i];
		if (!list || i + 1 >= argc)
			continue;
		if (argv[i + 1][0] == '-')
			continue;
		out[n++] = store + used;
		store[used] = 0;
		while (i + 1 < argc && argv[i + 1][0] != '-') {
			size_t len = strlen(argv[++i]);
			if (used + len + 2 > cap)
				return -1;
			if (store[used])
				strcat(store + used, ",");
			strcat(store + used, argv[i]);
		}
		used += strlen(store + used) + 1;
	}
	out[n] = NULL;
	return n;
}

/* The metrics of entries not enabled whose tracker runs for another entry. */
static int left_out(const struct monitor *m, struct tracker **trackers, int nt, const char **blocked)
{
	int n = 0;

	for (int e = 0; e < m->n; e++) {
		bool running = false;
		if (!m->entries[e].e->metric || !m->any_enabled || m->enabled[e])
			continue;
		for (int i = 0; i < nt; i++)
			running |= trackers[i]->ops == m->entries[e].ops;
		if (running)
			blocked[n++] = m->entries[e].e->metric;
	}
	return n;
}

static bool is_left_out(const char *metric, const char *const *blocked, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(blocked[i], metric))
			return true;
	return false;
}

/*
 * When only some of a tracker's event metrics are enabled (tcp_connect without
 * tcp_accept): the others are left out here, before any sink sees them.
 */
struct filter_sink {
	struct sink base;
	struct sink *inner;
	int n;
	const char *blocked[MAX_ENTRIES];
};

static void filter_record(struct sink *s, const struct schema *sc, json_t *obj)
{
	struct filter_sink *f = (struct filter_sink *)s;

	if (is_left_out(sc->metric, f->blocked, f->n))
		return;
	f->inner->ops->record(f->inner, sc, obj);
}

static void filter_table_begin(struct sink *s, const struct schema *sc, const char *title)
{
	struct filter_sink *f = (struct filter_sink *)s;

	f->inner->ops->table_begin(f->inner, sc, title);
}

static void filter_table_row(struct sink *s, const struct schema *sc, json_t *obj)
{
	struct filter_sink *f = (struct filter_sink *)s;

	f->inner->ops->table_row(f->inner, sc, obj);
}

static void filter_summary(struct sink *s, const struct schema *sc, json_t *obj)
{
	struct filter_sink *f = (struct filter_sink *)s;

	f->inner->ops->summary(f->inner, sc, obj);
}

static FILE *filter_text(struct sink *s)
{
	return sink_text(((struct filter_sink *)s)->inner);
}

static void filter_batch(struct sink *s)
{
	sink_batch(((struct filter_sink *)s)->inner);
}

static void filter_flush(struct sink *s)
{
	sink_flush(((struct filter_sink *)s)->inner);
}

static int filter_status(struct sink *s)
{
	return sink_status(((struct filter_sink *)s)->inner);
}

static int filter_watch_fd(struct sink *s)
{
	return sink_watch_fd(((struct filter_sink *)s)->inner);
}

static int filter_close(struct sink *s)
{
	struct sink *inner = ((struct filter_sink *)s)->inner;

	free(s);
	return sink_close(inner);
}

static const struct sink_ops filter_ops = {
	.record = filter_record,
	.table_begin = filter_table_begin,
	.table_row = filter_table_row,
	.summary = filter_summary,
	.text = filter_text,
	.batch = filter_batch,
	.flush = filter_flush,
	.status = filter_status,
	.watch_fd = filter_watch_fd,
	.close = filter_close,
};

/* inner, or a filter in front of it when some metrics are left out (NULL: out of memory). */
static struct sink *filtered(struct sink *inner, const struct monitor *m, struct tracker **trackers, int nt)
{
	struct filter_sink *f;
	const char *blocked[MAX_ENTRIES];
	int n = left_out(m, trackers, nt, blocked);

	if (!n)
		return inner;
	if (!(f = calloc(1, sizeof(*f)))) {
		sink_close(inner);
		return NULL;
	}
	f->base.ops = &filter_ops;
	f->base.env = inner->env;
	inner->env = NULL; /* the filter tags them */
	f->inner = inner;
	f->n = n;
	memcpy(f->blocked, blocked, sizeof(blocked));
	return &f->base;
}

static const struct opt *option_named(const struct tracker_ops *ops, const char *name)
{
	for (const struct opt *o = ops->options; o->name; o++)
		if (!strcmp(o->name, name))
			return o;
	return NULL;
}

static struct monitor m;

int monitor_main(const struct tool_doc *doc, const struct tracker_ops *const *ops, int n, int argc,
		 char **argv)
{
	static const struct opt head[] = {
		OPT_ENTRY_PID,
		{ OPT_ALL, 0, "all", NULL, "trace every process (instead of -p)" },
		{ OPT_CHILDREN, 0, "children", NULL,
		  "also trace the -p pids' children (workers), also ones started later" },
		{ OPT_ENABLE, 0, "enable", "LIST", "the trackers to run (words or a comma list; default: all)" },
	};
	static const struct opt tail[] = { OPT_ENTRIES_TRACKER_TAIL };
	struct opt table[MAX_FLAG_OPTS + 32];
	static struct sink_opts sinkopts;
	static struct common_opts common = { .sink = &sinkopts };
	struct tracker *trackers[MAX_ENTRIES];
	const struct schema *schemas[MAX_SCHEMAS], *const *list = schemas;
	const char *blocked[MAX_ENTRIES];
	int nschemas = 0, nblocked;
	char *args[MAX_ARGS], store[4096];
	int nt = 0, nopt = 0, nargs, rc = EXIT_USAGE;
	struct sink *sink = NULL;

	m.sink = common.sink;
	log_progname = doc->name;
	for (int i = 0; i < n; i++)
		for (const struct monitor_entry *e = ops[i]->monitor; e && e->name; e++) {
			if (m.n == MAX_ENTRIES) {
				log_error("too many trackers (at most %d)", MAX_ENTRIES);
				return EXIT_RUNTIME;
			}
			m.entries[m.n++] = (struct slot){ e, ops[i] };
		}
	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		table[nopt++] = head[i];
	for (int e = 0; e < m.n; e++)
		for (int f = 0; f < MONITOR_MAX_FLAGS && m.entries[e].e->flags[f].flag; f++) {
			int k = nopt - (int)(sizeof(head) / sizeof(head[0]));
			if (k >= MAX_FLAG_OPTS)
				break;
			m.flag_entry[k] = e;
			m.flag_index[k] = f;
			table[nopt++] = (struct opt){ OPT_FLAG_BASE + k, 0, m.entries[e].e->flags[f].flag,
						      m.entries[e].e->flags[f].arg, m.entries[e].e->flags[f].help };
		}
	for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
		table[nopt++] = tail[i];

	if ((nargs = join_lists(argc, argv, args, store, sizeof(store))) < 0) {
		opts_usage_error("the -p and --enable lists are too long");
		return EXIT_USAGE;
	}
	if (opts_parse(doc, table, nargs, args, &common, on_option, &m) < 0)
		return EXIT_USAGE;
	/* rows of many hosts and services meet in one table: the tag is what tells them apart */
	if (!common.env && sinkopts_any_database(common.sink) && !common.print_fields && !common.print_ebpf)
		return opts_usage_error("-e ENV is required with a database: it tags every row"), EXIT_USAGE;
	if (!common.npids && !m.all && !common.print_fields && !common.print_ebpf)
		return opts_usage_error("-p PID or --all is required"), EXIT_USAGE;
	if (common.npids && m.all)
		return opts_usage_error("-p and --all exclude each other"), EXIT_USAGE;
	if (m.children && !common.npids && !common.print_fields && !common.print_ebpf)
		return opts_usage_error("--children needs -p (the parent processes to follow)"), EXIT_USAGE;

	for (int e = 0; e < m.n; e++) {
		if (m.any_enabled && !m.enabled[e])
			continue;
		bool running = false;

		if (m.all && m.entries[e].e->needs_pids) {
			if (m.any_enabled)
				log_warn("%s traces -p pids only: left out with --all", m.entries[e].e->name);
			continue;
		}
		/* entries of one tracker (tcp_accept, tcp_connect) share one instance */
		for (int i = 0; i < nt; i++)
			running |= trackers[i]->ops == m.entries[e].ops;
		if (running)
			continue;
		if (!(trackers[nt] = tracker_new(m.entries[e].ops, &common)))
			goto out;
		nt++;
	}
	/* --children: every tracker that follows -p pids follows their children too */
	for (int i = 0; m.children && i < nt; i++) {
		const struct opt *o = option_named(trackers[i]->ops, "children");

		if (o && tracker_option(trackers[i], o->id, NULL))
			goto out;
	}
	/* the original's per-tracker flags, as the tracker's own options */
	for (int g = 0; g < m.ngiven; g++) {
		const struct slot *s = &m.entries[m.given[g].entry];
		const struct monitor_flag *f = &s->e->flags[m.given[g].flag];
		struct tracker *t = NULL;
		const struct opt *o;

		for (int i = 0; i < nt; i++)
			if (trackers[i]->ops == s->ops)
				t = trackers[i];
		if (!t) {
			log_warn("--%s: %s is not running (not enabled); ignored", f->flag, s->e->name);
			continue;
		}
		if (!f->option) /* what the tracker does anyway: accepted for old command lines */
			continue;
		if (!(o = option_named(t->ops, f->option)) || tracker_option(t, o->id, m.given[g].arg))
			goto out;
	}
	for (int i = 0; i < nt; i++)
		if (trackers[i]->ops->check && trackers[i]->ops->check(trackers[i]))
			goto out;
	if (!nt) {
		opts_usage_error("no tracker to run");
		goto out;
	}
	rc = EXIT_RUNTIME;
	/* the databases get tables for what is written: not for metrics left out */
	nblocked = left_out(&m, trackers, nt, blocked);
	for (int i = 0; i < nt; i++)
		for (const struct schema *const *sc = trackers[i]->ops->schemas; *sc && nschemas < MAX_SCHEMAS - 1; sc++)
			if (!is_left_out((*sc)->metric, blocked, nblocked))
				schemas[nschemas++] = *sc;
	schemas[nschemas] = NULL;
	if (!(sink = sinks_open(&common, &list, 1)) || !(sink = filtered(sink, &m, trackers, nt)))
		goto out;
	rc = runner_run_each(trackers, nt, sink, &common);
	if (sink_close(sink) && rc == EXIT_OK)
		rc = EXIT_RUNTIME;
out:
	for (int i = 0; i < nt; i++)
		tracker_free(trackers[i]);
	return rc;
}
