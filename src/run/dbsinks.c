#include "dbsinks.h"

#include <stdlib.h>

#include "dbtable.h"
#include "log.h"

#define MAX_SCHEMAS 64

/* Several sinks as one: records to every one, tables and text to stdout (when there). */
struct tee_sink {
	struct sink base;
	struct sink *out; /* stdout, or NULL */
	int n;
	struct sink *db[2];
};

static void tee_record(struct sink *s, const struct schema *sc, json_t *obj)
{
	struct tee_sink *t = (struct tee_sink *)s;

	if (t->out)
		t->out->ops->record(t->out, sc, obj);
	for (int i = 0; i < t->n; i++)
		t->db[i]->ops->record(t->db[i], sc, obj);
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

	for (int i = 0; i < t->n; i++)
		rc |= sink_close(t->db[i]);
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

struct sink *sinks_open(struct common_opts *c, const struct schema *const *const *lists, int nlists)
{
	const struct schema *schemas[MAX_SCHEMAS];
	struct tee_sink *t;
	int n;

	/* --fields and --ebpf print and exit: no database is touched */
	if (!sinkopts_any_database(c->sink) || c->print_fields || c->print_ebpf)
		return sink_stdout_open(c->json, c->env);
	sinkopts_init(c->sink);
	c->json = true;
	n = dbtable_collect(lists, nlists, schemas, MAX_SCHEMAS);
	if (!(t = calloc(1, sizeof(*t))))
		return NULL;
	t->base.ops = &tee_ops;
	t->base.env = c->env;
	if (c->sink->sqlite && (t->db[t->n] = sink_sqlite_open(c->sink->sqlite, schemas, n)))
		t->n++;
	else if (c->sink->sqlite)
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
