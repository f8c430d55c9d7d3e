#include "tracker.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

struct tracker *tracker_new(const struct tracker_ops *ops, const struct common_opts *common)
{
	struct tracker *t = calloc(1, ops->size);

	if (!t)
		return NULL;
	t->ops = ops;
	t->common = common;
	t->poll_ms = 100;
	if (ops->init)
		ops->init(t);
	return t;
}

int tracker_option(struct tracker *t, int id, const char *arg)
{
	return t->ops->option ? t->ops->option(t, id, arg) : -1;
}

struct parse {
	struct tracker *t;
	struct common_opts *common;
};

static int on_option(int id, const char *arg, void *ctx)
{
	struct parse *p = ctx;
	/* arg is argv's own memory (getopt's optarg): a password in it is blanked */
	int r = sinkopts_handle(p->common->sink, id, (char *)arg);

	if (r)
		return r < 0 ? -1 : 0;
	return tracker_option(p->t, id, arg);
}

int tracker_parse_args(struct tracker *t, const struct tool_doc *doc, struct common_opts *common,
		       int argc, char **argv)
{
	struct parse p = { t, common };

	if (opts_parse(doc, t->ops->options, argc, argv, common, on_option, &p) < 0)
		return -1;
	return t->ops->check ? t->ops->check(t) : 0;
}

int tracker_check_pids_folded(const struct tracker *t, bool folded)
{
	const struct common_opts *c = t->common;

	if (!c->print_ebpf && !c->print_fields && c->npids == 0)
		return opts_usage_error("give the processes to trace with -p PID");
	if (folded && c->json)
		return opts_usage_error("-f and -j exclude each other");
	return 0;
}

void tracker_free(struct tracker *t)
{
	if (!t)
		return;
	if (t->ops->destroy)
		t->ops->destroy(t);
	if (t->prog)
		t->ops->bpf->close(t->prog);
	cflags_free(&t->cflags);
	free(t);
}

int tracker_no_targets(const struct tracker *t)
{
	/* pymonitor runs several: the name says which one (a tool's own name is its prefix) */
	if (strcmp(log_progname, t->ops->name))
		log_error("%s: no -p pid is left to trace", t->ops->name);
	else
		log_error("no -p pid is left to trace");
	return -1;
}
