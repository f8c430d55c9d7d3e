#include "dbsinks.h"

#include <stdlib.h>

#include "dbtable.h"
#include "log.h"
#include "profrows.h"

#define MAX_SCHEMAS 64

/* How long after a window's end its rows are written (samples reach the sink a poll late). */
#define PROFILE_LAG_US 2000000

/*
 * Several sinks as one: records to every one, tables and text to stdout (when there).
 * Stack samples reach the databases as aggregated profile rows (profrows.h), and as
 * rows of their own too with --raw-samples.
 */
struct tee_sink {
	struct sink base;
	struct sink *out; /* stdout, or NULL */
	int n;
	struct sink *db[2];
	struct profrows *prof;
	bool raw_samples;
};

static void to_databases(void *ctx, const struct schema *sc, json_t *obj)
{
	struct tee_sink *t = ctx;

	for (int i = 0; i < t->n; i++)
		t->db[i]->ops->record(t->db[i], sc, obj);
}

static void tee_record(struct sink *s, const struct schema *sc, json_t *obj)
{
	struct tee_sink *t = (struct tee_sink *)s;

	if (t->out)
		t->out->ops->record(t->out, sc, obj);
	if (t->prof && profrows_wanted(sc)) {
		profrows_add(t->prof, sc, obj);
		/* the dictionary rows first: an event row may name them */
		profrows_emit_stacks(t->prof, to_databases, t);
		/* a sample is no event: it is in the profile (and with --raw-samples a row) */
		if (profrows_is_sample(sc) && !t->raw_samples)
			return;
	}
	to_databases(t, sc, obj);
}

/* The profile rows of the windows that ended (all: every one) into the databases. */
static void emit_profiles(struct tee_sink *t, bool all)
{
	if (t->prof)
		profrows_emit(t->prof, dbtable_now_us(), PROFILE_LAG_US, all, to_databases, t);
}

static void tee_table_begin(struct sink *s, const struct schema *sc, const char *title)
{
	struct tee_sink *t = (struct tee_sink *)s;

	if (t->out)
		t->out->ops->table_begin(t->out, sc, title);
}

static void tee_table_row(struct sink *s, const struct schema *sc, json_t *obj)
{
	struct tee_sink *t = (struct tee_sink *)s;

	if (t->out)
		t->out->ops->table_row(t->out, sc, obj);
}

static void tee_summary(struct sink *s, const struct schema *sc, json_t *obj)
{
	struct tee_sink *t = (struct tee_sink *)s;

	if (t->out)
		t->out->ops->summary(t->out, sc, obj);
}

static FILE *tee_text(struct sink *s)
{
	struct tee_sink *t = (struct tee_sink *)s;

	return t->out ? sink_text(t->out) : NULL;
}

static void tee_batch(struct sink *s)
{
	sink_batch(((struct tee_sink *)s)->out);
}

static void tee_flush(struct sink *s)
{
	struct tee_sink *t = (struct tee_sink *)s;

	emit_profiles(t, false);
	sink_flush(t->out);
	for (int i = 0; i < t->n; i++)
		sink_flush(t->db[i]);
}

static int tee_status(struct sink *s)
{
	struct tee_sink *t = (struct tee_sink *)s;
	int rc = t->out ? sink_status(t->out) : 0;

	for (int i = 0; i < t->n; i++)
		rc |= sink_status(t->db[i]);
	return rc;
}

static int tee_watch_fd(struct sink *s)
{
	return sink_watch_fd(((struct tee_sink *)s)->out);
}

static int tee_close(struct sink *s)
{
	struct tee_sink *t = (struct tee_sink *)s;
	int rc = sink_close(t->out);

	emit_profiles(t, true);
	for (int i = 0; i < t->n; i++)
		rc |= sink_close(t->db[i]);
	profrows_free(t->prof);
	free(t);
	return rc ? -1 : 0;
}

static const struct sink_ops tee_ops = {
	.record = tee_record,
	.table_begin = tee_table_begin,
	.table_row = tee_table_row,
	.summary = tee_summary,
	.text = tee_text,
	.batch = tee_batch,
	.flush = tee_flush,
	.status = tee_status,
	.watch_fd = tee_watch_fd,
	.close = tee_close,
};

/*
 * The tables of the databases: the event schemas, a stack-sampling one replaced by its
 * profile (kept too with --raw-samples), and then the dictionary of stacks. Returns how
 * many; *profiles says whether there are profile tables.
 */
static int database_schemas(const struct schema **in, int nin, bool raw, const struct schema **out, bool *profiles)
{
	int n = 0;

	*profiles = false;
	for (int i = 0; i < nin && n < MAX_SCHEMAS - 2; i++) {
		const struct schema *p = profrows_profile_of(in[i]);
		/* samples are no events: their own rows only with --raw-samples */
		if (!profrows_is_sample(in[i]) || raw)
			out[n++] = in[i];
		if (p)
			out[n++] = p;
		*profiles |= profrows_wanted(in[i]);
	}
	if (*profiles)
		out[n++] = &profrows_stacks_schema;
	return n;
}

struct sink *sinks_open(struct common_opts *c, const struct schema *const *const *lists, int nlists)
{
	const struct schema *events[MAX_SCHEMAS], *schemas[MAX_SCHEMAS];
	struct tee_sink *t;
	bool profiles;
	int n;

	/* --fields and --ebpf print and exit: no database is touched */
	if (!sinkopts_any_database(c->sink) || c->print_fields || c->print_ebpf)
		return sink_stdout_open(c->json, c->env);
	sinkopts_init(c->sink);
	c->json = true;
	n = dbtable_collect(lists, nlists, events, MAX_SCHEMAS);
	n = database_schemas(events, n, c->sink->raw_samples, schemas, &profiles);
	if (!(t = calloc(1, sizeof(*t))))
		return NULL;
	t->base.ops = &tee_ops;
	t->base.env = c->env;
	t->raw_samples = c->sink->raw_samples;
	if (profiles && !(t->prof = profrows_new(c->sink->profile_window_s))) {
		free(t);
		return NULL;
	}
	if (c->sink->sqlite && (t->db[t->n] = sink_sqlite_open(c->sink->sqlite, schemas, n)))
		t->n++;
	else if (c->sink->sqlite)
		goto fail;
	if (c->sink->sqlite && c->sink->retain_days && sink_sqlite_retain(t->db[t->n - 1], c->sink->retain_days))
		goto fail;
	if (c->sink->ch_url && (t->db[t->n] = sink_clickhouse_open(c->sink, schemas, n)))
		t->db[t->n++]->env = c->env; /* its own rows (ebpf_dropped) carry it too */
	else if (c->sink->ch_url)
		goto fail;
	if (c->sink->also_stdout && !(t->out = sink_stdout_open(true, NULL)))
		goto fail;
	return &t->base;
fail:
	tee_close(&t->base);
	return NULL;
}
